"""A Mem0-compatible memory layer driven by Memory-R1's fact extractor, manager and answer agent.

    from memjax.memory_layer import Memory, MemoryConfig, RoleSpec
    memory = Memory.from_config(MemoryConfig(root="/tmp/mem", manager=RoleSpec("packaged:smollm2")))
    memory.add("I moved to Berlin.", user_id="alice")      # {"results": [{"id", "memory", "event"}]}

memory.Memory        add / search / get / get_all / update / delete / delete_all / history /
                     reset / answer, one atomically saved bank per user
config.MemoryConfig  typed settings (root, each role's RoleSpec, embedder, limits)
roles                RoleSpec, role_policy (a source -> ChatPolicy), register_source
scripted             model-free roles for tests and quick use
store                per-user persistence (bank snapshot + the layer's records, one atomic save)
"""

from memjax.memory_layer.config import MemoryConfig
from memjax.memory_layer.memory import Memory
from memjax.memory_layer.roles import RoleSpec, register_source, role_policy
from memjax.memory_layer.scripted import ScriptedAnswer, ScriptedFacts, ScriptedManager
from memjax.memory_layer.shapes import InputLimits, MemoryInputError, MemoryNotFound

__all__ = [
    "InputLimits",
    "Memory",
    "MemoryConfig",
    "MemoryInputError",
    "MemoryNotFound",
    "RoleSpec",
    "ScriptedAnswer",
    "ScriptedFacts",
    "ScriptedManager",
    "register_source",
    "role_policy",
]
