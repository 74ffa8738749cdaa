"""VERL 0.9.1 on CPU: a ``cpu`` platform and plain gloo process groups, for the nano curriculum and CI.

Loaded only through VERL's plugin hook: ``VERL_USE_EXTERNAL_MODULES=repro.testing.verl_cpu`` makes
``import verl`` import this module in every process VERL starts (torchrun ranks, Ray workers), and
``VERL_PLATFORM=cpu`` then selects the platform registered here. No GPU job sets either variable,
so nothing here can reach a GPU run (``tests/repro/test_verl_cpu.py`` checks that importing
``verl`` without them leaves VERL's own platform detection alone). :func:`cpu_environment` is the
one place that builds those variables.

Why each piece is needed (found by running VERL's unmodified trainers on this machine):

- ``current_device()`` returns the *string* ``"cpu"``: VERL moves tensors with
  ``tensor.to(get_device_id())``, and an int there means "accelerator number N" to torch.
- VERL's two process-group initialisers (``verl.utils.distributed.initialize_global_process_group``
  and ``initialize_global_process_group_ray``) build ``f"cpu:gloo,{device}:{backend}"``, which on
  this platform is ``cpu:gloo,cpu:gloo``: torch refuses a device named twice. The wrapper of
  ``torch.distributed.init_process_group`` installed here turns a backend string whose every part is
  ``cpu:gloo`` into plain ``gloo`` and passes anything else through untouched.
- ``device_module`` is a small namespace over ``torch.cpu`` with the memory, RNG and stream calls
  VERL makes on ``get_torch_device()`` (``torch.cpu`` lacks ``empty_cache``, ``mem_get_info``,
  ``memory_allocated``, ``get_rng_state`` …); memory figures are the process's RSS and the
  machine's RAM, so VERL's memory log lines stay meaningful.
- every process runs torch on a fixed number of threads (:func:`repro.testing.threads.fix_threads`, ``OMP_NUM_THREADS``,
  1 unless set): a float reduction split over another thread count rounds differently, and CI's
  figures must be the same on two runs of one commit whatever else the machine is doing.
- ``ray_resource_name()`` is ``"GPU"``: VERL schedules its workers only on Ray GPU resources, so a
  CPU job declares logical GPUs (``ray_init.num_gpus``), one per worker.

VERL symbols touched, and whether VERL documents them as an extension point:

- ``verl.plugin.platform.PlatformBase`` and ``PlatformRegistry.register`` (public: the plugin API)
- the environment variables ``VERL_USE_EXTERNAL_MODULES`` and ``VERL_PLATFORM`` (public)
- the backend string built by ``verl.utils.distributed`` (private: matched exactly; if VERL changes
  it, the wrapper passes it through and torch's own error names it)

:func:`check_verl_surface` fails loudly, naming the symbol, when a VERL upgrade moves one of them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import types
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed

from repro.testing.threads import fix_threads

PLATFORM_NAME = "cpu"
MODULE = __name__


def cpu_environment(extra_modules: tuple[str, ...] = ()) -> dict[str, str]:
    """The variables that make every VERL process of a job load this module and run on CPU.

    ``VERL_ENGINE_DEVICE``/``VERL_ENGINE_VENDOR`` route VERL's ``EngineRegistry`` to the engines
    registered for ``(cuda, nvidia)``: VERL's FSDP engine, or repro's structured engine when the
    stage loads ``repro.structured_actor`` (the same classes a GPU job gets).
    """
    modules = ",".join((MODULE, *extra_modules))
    return {
        "VERL_USE_EXTERNAL_MODULES": modules,
        "VERL_PLATFORM": PLATFORM_NAME,
        "VERL_ENGINE_DEVICE": "cuda",
        "VERL_ENGINE_VENDOR": "nvidia",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "MKL_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        # set iteration and str hashes the same in every process of every run (VERL forwards it to Ray)
        "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0"),
    }


def _rss_bytes() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _mem_get_info(*_: Any) -> tuple[int, int]:
    import psutil

    vm = psutil.virtual_memory()
    return int(vm.available), int(vm.total)


@contextlib.contextmanager
def _no_stream(*_: Any, **__: Any) -> Iterator[None]:
    yield


def _noop(*_: Any, **__: Any) -> None:
    return None


def _device_module() -> types.SimpleNamespace:
    """``torch.cpu`` plus what VERL calls on ``get_torch_device()`` that ``torch.cpu`` lacks."""
    cpu = torch.cpu
    return types.SimpleNamespace(
        is_available=lambda: True,
        current_device=lambda: PLATFORM_NAME,
        device_count=lambda: 1,
        set_device=_noop,
        synchronize=_noop,
        empty_cache=_noop,
        ipc_collect=_noop,
        set_per_process_memory_fraction=_noop,
        mem_get_info=_mem_get_info,
        memory_allocated=lambda *_: _rss_bytes(),
        memory_reserved=lambda *_: _rss_bytes(),
        max_memory_allocated=lambda *_: _rss_bytes(),
        max_memory_reserved=lambda *_: _rss_bytes(),
        reset_peak_memory_stats=_noop,
        get_device_name=lambda *_: "cpu",
        get_rng_state=lambda *_: torch.get_rng_state(),
        set_rng_state=lambda state, *_: torch.set_rng_state(state),
        manual_seed=torch.manual_seed,
        manual_seed_all=torch.manual_seed,
        Stream=cpu.Stream,
        Event=cpu.Event,
        current_stream=cpu.current_stream,
        stream=_no_stream,
        amp=cpu.amp,
    )


def gloo_backend(backend: Any) -> Any:
    """``cpu:gloo,cpu:gloo`` (VERL's string on this platform) as plain ``gloo``; anything else as given."""
    if isinstance(backend, str) and backend and all(p.strip() == "cpu:gloo" for p in backend.split(",")):
        return "gloo"
    return backend


def _install_gloo_wrapper() -> None:
    """Wrap ``torch.distributed.init_process_group`` once per process (idempotent)."""
    original = torch.distributed.init_process_group
    if getattr(original, "_pr1_gloo", False):
        return

    @functools.wraps(original)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        if "backend" in kwargs:
            kwargs["backend"] = gloo_backend(kwargs["backend"])
        elif args:
            args = (gloo_backend(args[0]), *args[1:])
        return original(*args, **kwargs)

    init_process_group._pr1_gloo = True  # type: ignore[attr-defined]
    torch.distributed.init_process_group = init_process_group  # type: ignore[assignment]


def check_verl_surface() -> None:
    """Fail loudly, naming the symbol, when VERL no longer has what this module relies on."""
    import importlib

    needed = {
        "verl.plugin.platform": ("PlatformBase", "PlatformRegistry", "get_platform"),
        "verl.utils.distributed": ("initialize_global_process_group", "initialize_global_process_group_ray"),
        "verl.utils.device": ("get_device_id", "get_torch_device", "get_device_name"),
    }
    for module_name, names in needed.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise RuntimeError(f"repro's CPU platform needs {module_name} (VERL 0.9.1): {error}") from error
        for name in names:
            if not hasattr(module, name):
                raise RuntimeError(f"repro's CPU platform needs {module_name}.{name}, which this VERL lacks (0.9.1 has it)")


def _register() -> None:
    from verl.plugin.platform import PlatformBase, PlatformRegistry

    @PlatformRegistry.register(platform=PLATFORM_NAME)
    class PlatformCPU(PlatformBase):
        """VERL's platform interface on the host CPU (tests and the nano curriculum only)."""

        _module = _device_module()

        @property
        def device_name(self) -> str:
            return PLATFORM_NAME

        @property
        def vendor_name(self) -> str:
            return "cpu"

        @property
        def device_module(self) -> Any:
            return self._module

        def is_available(self) -> bool:
            return True

        def is_platform_available(self, use_smi_check: bool = False) -> bool:
            # never auto-detected: only VERL_PLATFORM=cpu selects it
            return False

        def current_device(self) -> Any:  # a str, on purpose (module docstring)
            return PLATFORM_NAME

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            return None

        def synchronize(self, device_index: int | None = None) -> None:
            return None

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            return None

        def empty_cache(self) -> None:
            return None

        def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"

        @contextlib.contextmanager
        def nvtx_range(self, msg: str) -> Iterator[None]:
            yield

        def profiler_start(self) -> None:
            return None

        def profiler_stop(self) -> None:
            return None

        def ray_resource_name(self) -> str:
            return "GPU"

        def ray_noset_envvars(self) -> list[str]:
            return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self) -> Any:
            return None


check_verl_surface()
_register()
_install_gloo_wrapper()
fix_threads()
