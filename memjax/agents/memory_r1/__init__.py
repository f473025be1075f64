"""Memory-R1: prompts, defensive parsers, id mapping and rewards for its two agents.

facts = parse_facts(model(render_fact_messages(turns, date))).facts
ids = IdMap.from_memories([(memory.id, memory.text) for memory in related])
ops = parse_manager_output(model(render_manager_prompt(ids.prompt_entries(), facts)), ids).ops
prompt = render_answer_prompt(a, memories_a, b, memories_b, question, distill=True)
reward = answer_reward(model(prompt), gold)
"""

from memjax.agents.memory_r1.answer_parser import AnswerParse, parse_answer
from memjax.agents.memory_r1.answer_prompt import ANSWER_MARKER, render_answer_prompt
from memjax.agents.memory_r1.fact_parser import FactsParse, parse_facts
from memjax.agents.memory_r1.fact_prompt import render_fact_messages
from memjax.agents.memory_r1.id_map import IdMap
from memjax.agents.memory_r1.manager_parser import (
    ManagerParse,
    MemoryOp,
    Rejection,
    parse_manager_output,
)
from memjax.agents.memory_r1.manager_prompt import render_manager_prompt
from memjax.agents.memory_r1.rewards import answer_reward, answer_score

__all__ = [
    "ANSWER_MARKER",
    "AnswerParse",
    "FactsParse",
    "IdMap",
    "ManagerParse",
    "MemoryOp",
    "Rejection",
    "answer_reward",
    "answer_score",
    "parse_answer",
    "parse_facts",
    "parse_manager_output",
    "render_answer_prompt",
    "render_fact_messages",
    "render_manager_prompt",
]
