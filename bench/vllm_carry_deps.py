"""Which of vLLM 0.24.0's declared requirements travel to the GPU machine, which are already there,
and which are left out, with the reason for each (read by ``bench/vllm_carry.py``).

How the choice was made (2026-12, vLLM 0.24.0's wheel, Python 3.12 semantics):

* import graph: the wheel's Python files were imported (``vllm``, ``vllm.entrypoints.llm``, the v1
  engine, core, executors, GPU worker and model runner, ``models.qwen3``, the flash-attention
  backend, sampler, model loader, structured-output manager, tokenizers, detokenizer) in a bare
  interpreter holding only the GPU image's packages, and each candidate was blocked in turn: what
  made the import fail is carried (``CARRIED``). Class-level annotations are evaluated at class
  creation before Python 3.14, so ``GuidanceGrammar.ll_matcher: llguidance.LLMatcher`` and the
  xgrammar backend's annotations import llguidance and xgrammar (and xgrammar's tvm-ffi) on
  ``from vllm import LLM``, though vLLM wraps them in a ``LazyLoader``; ``LLM`` mixes in the pooling
  offline API, whose factories import fastapi and starlette; ``vllm.reasoning`` imports the MCP
  tool server, which imports openai and openai-harmony at module level;
* run path (function-level imports, read in the source): setproctitle (guarded, names the engine
  process); the top-p/top-k sampler asks for FlashInfer in its constructor unless
  ``VLLM_USE_FLASHINFER_SAMPLER=0`` — FlashInfer is left out (447 MB of cubins), so the GPU scripts
  set that variable; on compute capability 9.0 the attention backend is FLASH_ATTN (FA3, shipped
  inside the vLLM wheel), FlashInfer only after it;
* the GPU machine's packages: the image list read on 2026-11-17 (``PRESENT``; versions only where a
  session saw them). That list is a reading, not a promise: ``vllm_carry.py check`` imports each
  module there and prints what is missing.
"""

from __future__ import annotations

VLLM = "vllm==0.24.0"

CARRIED: dict[str, str] = {
    # name==version (what pip resolves for vllm==0.24.0 on cp312) -> why it must travel
    "vllm==0.24.0": "the engine itself (279 MB)",
    "pyzmq==27.3.0": "engine core <-> LLM IPC (vllm.utils.network_utils, import time)",
    "msgspec==0.23.0": "SamplingParams and engine messages are msgspec structs (import time)",
    "cbor2==6.3.0": "prefix-cache block hashing (vllm.utils.hashing, import time)",
    "cachetools==8.0.2": "vllm.utils.cache (import time)",
    "pybase64==1.5.1": "vllm.multimodal.media (imported by the input processor, import time)",
    "setproctitle==1.3.8": "names the engine-core process (run time, guarded)",
    "partial-json-parser==0.2.1.1.post7": "vllm.tool_parsers.utils (import time via chat utils)",
    "pydantic==2.14.4": "every vllm config is a pydantic dataclass (import time)",
    "pydantic_core==2.50.5": "pydantic's core",
    "annotated-types==0.8.0": "pydantic's requirement",
    "typing-inspection==0.4.5": "pydantic's and fastapi's requirement",
    "typing-extensions==4.16.0": "pydantic 2.14.4 needs >= 4.16.0, the image's version is unknown (45 kB; newer is compatible)",
    "openai==3.57.0": "vllm.entrypoints.mcp.tool, imported by vllm.reasoning (import time)",
    "httpx2==2.16.2": "openai's HTTP client (imported by openai)",
    "httpcore2==2.16.2": "httpx2's requirement",
    "truststore==0.10.5": "httpx2's and httpcore2's requirement",
    "jiter==0.19.0": "openai's requirement",
    "sniffio==1.3.1": "openai's requirement (imported by openai)",
    "openai-harmony==0.0.8": "vllm.entrypoints.mcp.tool_server (import time)",
    "fastapi==0.136.3": "vllm.entrypoints.pooling.factories, mixed into LLM (import time); no [standard] extra",
    "starlette==1.10.0": "fastapi's requirement, imported by the pooling factories",
    "xgrammar==0.2.3": "structured-output backend: class annotations evaluated on import",
    "apache-tvm-ffi==0.1.9": "xgrammar's runtime (tvm_ffi, import time); vllm pins it",
    "llguidance==1.7.6": "structured-output backend: class annotations evaluated on import",
}

PR1_EVAL: dict[str, str] = {
    # pr1-eval's own requirements that the image lacks and `pr1-eval run` imports (grading)
    "math-verify==0.9.0": "pr1-eval's grader (imported when a response is graded)",
    "latex2sympy2_extended==1.11.0": "math-verify's requirement",
    "antlr4-python3-runtime==4.9.3": "latex2sympy2's parser runtime (sdist only: built here into a py3 wheel)",
}
BUILT = ("antlr4-python3-runtime==4.9.3",)
"""Pins published as source only: ``pip wheel`` builds them here (pure Python)."""

RAY: dict[str, str] = {
    # only with --with-ray: pr1-eval --ray; 79 MB, more than one call alone
    "ray==2.60.0": "pr1-eval run --ray (not a vllm requirement)",
    "jsonschema==4.26.0": "ray's requirement",
    "jsonschema-specifications==2025.9.1": "jsonschema's requirement",
    "referencing==0.37.0": "jsonschema's requirement",
    "rpds-py==2026.9.1": "referencing's requirement",
}

PRESENT: dict[str, str | None] = {
    # on the GPU image (2026-11-17 list); a version where a session saw it, else None
    "torch": "2.11.0", "torchaudio": "2.11.0", "torchvision": "0.26.0", "transformers": "5.17.0",
    "triton": "3.6.0", "numpy": "2.5.2", "tokenizers": "0.23.2", "safetensors": "0.8.0",
    "huggingface-hub": "1.33.0", "sentencepiece": "0.2.2", "tiktoken": "0.14.0",
    "numba": None, "regex": None, "requests": None, "tqdm": None, "pyyaml": None, "filelock": None,
    "protobuf": None, "aiohttp": None, "psutil": None, "py-cpuinfo": None,
    "prometheus-client": None, "pillow": None, "opencv-python-headless": None, "einops": None,
    "cloudpickle": None, "ninja": None, "six": None, "setuptools": None, "anyio": None, "h11": None,
    "idna": None, "annotated-doc": None, "uvloop": None, "xxhash": None, "jinja2": None,
    "msgpack": None, "click": None, "packaging": None, "attrs": None, "aiohappyeyeballs": None,
    "aiosignal": None, "frozenlist": None, "multidict": None, "propcache": None, "yarl": None,
    "httpx": None, "hf-xet": None, "sympy": None,
}

_SERVER = "OpenAI-compatible server only (vllm serve), never imported by offline LLM.generate"
LEFT_OUT: dict[str, str] = {
    "prometheus-fastapi-instrumentator": _SERVER,
    "model-hosting-container-standards": "SageMaker server routes only",
    "anthropic": "Anthropic-API server endpoint only",
    "mcp": "MCP tool server of the Responses API; imported inside its functions",
    "watchfiles": "server SSL-certificate reloading only",
    "python-json-logger": "server JSON log formatting only",
    "ijson": "Mistral tool parser only",
    "mistral-common": "Mistral tokenizers/models only (tokenizer_mode=mistral), imported lazily",
    "lm-format-enforcer": "structured-output backend, imported when a request asks for it (pr1-eval never does)",
    "outlines-core": "structured-output backend, imported when a request asks for it",
    "diskcache": "outlines backend cache only",
    "lark": "outlines/grammar backends only",
    "jsonschema": "structured-output schema validation only (no module-level import in vllm)",
    "compressed-tensors": "quantized checkpoints only (imported by that quantization method)",
    "depyf": "torch.compile debug dumps only (compilation_config.debug_dump_path)",
    "blake3": "multimodal input hashing only (vllm.multimodal.hasher)",
    "flashinfer-python": "FlashInfer attention/sampler: FA3 is used on sm90; VLLM_USE_FLASHINFER_SAMPLER=0",
    "flashinfer-cubin": "FlashInfer's cubins (447 MB), see flashinfer-python",
    "tilelang": "mHC kernels of other architectures only (45 MB)",
    "nvidia-cudnn-frontend": "FA4/cute benchmarks and FlashInfer only (12 MB)",
    "nvidia-cutlass-dsl": "CuTe-DSL kernels (FA4 on sm100, mamba, multimodal masks) only",
    "quack-kernels": "CuTe-DSL kernels (mamba, FA4) only",
    "tokenspeed-mla": "MLA attention (DeepSeek-style models) only",
    "humming-kernels": "quantized GEMM kernels only",
    "fastsafetensors": "optional load_format=fastsafetensors; guarded module-level import",
    "opentelemetry-sdk": "tracing, imported in try/except, off unless otlp_traces_endpoint is set",
    "opentelemetry-api": "tracing, see opentelemetry-sdk",
    "opentelemetry-exporter-otlp": "tracing, see opentelemetry-sdk",
    "opentelemetry-semantic-conventions-ai": "tracing, see opentelemetry-sdk",
    # fastapi's [standard] extra, which vllm asks for: the server's ASGI stack
    "fastapi-cli": _SERVER,
    "python-multipart": _SERVER, "email-validator": _SERVER, "uvicorn": _SERVER,
    "pydantic-settings": _SERVER, "pydantic-extra-types": _SERVER, "fastar": _SERVER,
}
"""Declared requirements (of vllm, and of the carried wheels and the extras they ask for) that
do not travel. ``vllm_carry.py classify`` fails on a requirement in none of the three tables."""

IMPORTS_CARRIED = ("vllm", "zmq", "msgspec", "cbor2", "cachetools", "pybase64", "setproctitle",
                   "partial_json_parser", "pydantic", "pydantic_core", "annotated_types", "typing_inspection",
                   "openai", "httpx2", "httpcore2", "truststore", "jiter", "sniffio", "openai_harmony", "fastapi",
                   "starlette", "xgrammar", "tvm_ffi", "llguidance", "math_verify", "latex2sympy2_extended", "antlr4")
IMPORTS_PRESENT = ("torch", "torchvision", "torchaudio", "transformers", "triton", "numba", "numpy", "tokenizers",
                   "safetensors", "huggingface_hub", "sentencepiece", "tiktoken", "PIL", "cv2", "psutil", "cpuinfo",
                   "cloudpickle", "uvloop", "xxhash", "aiohttp", "requests", "prometheus_client", "google.protobuf",
                   "einops", "yaml", "regex", "tqdm", "filelock", "jinja2", "anyio", "h11", "idna",
                   "typing_extensions", "setuptools", "six", "annotated_doc")
"""What ``vllm_carry.py check`` imports on the GPU machine (module names, not distributions)."""

SLIM: dict[str, tuple[tuple[str, str], ...]] = {
    # wheel name -> (member glob, why a dense Qwen3 on an H200 never loads it); `plan --full` keeps all
    "vllm": (
        ("vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so",
         "FlashAttention 2 (81 MB): on sm90 vLLM picks FA3 (fa_utils.get_flash_attn_version); FA2 only for "
         "ALiBi or an explicit flash_attn_version=2; its import is guarded (FA2_AVAILABLE=False)"),
        ("vllm/_moe_C_stable_libtorch.abi3.so",
         "fused-MoE kernels (40 MB): dense models never call them; the import is guarded (a warning)"),
        ("vllm/vllm-rs", "the Rust frontend binary (12 MB), used only with VLLM_RUST_FRONTEND_PATH by vllm serve"),
        ("vllm/third_party/deep_gemm/_C.cpython-31[0134]-*", "DeepGEMM builds for other Pythons than 3.12"),
    ),
    "xgrammar": (
        ("xgrammar/lib/libxgrammar.a", "a static library for C++ linking (31 MB), never loaded by Python"),
    ),
}
"""Members dropped from the carried wheels by default: 165 MB, half the carry, three calls
instead of six. The manifest keeps the upstream wheel's sha256 beside the slim one's."""
