"""Lets vLLM's MooncakeConnector (P/D) start on a CPU-only torch, for the real-engine P/D test
(tests/real/vllm_pd_test.ts): its worker asks torch.accelerator.current_device_index(), which
raises when no accelerator exists; on the CPU platform device 0 is what set_device then takes.
Loaded only by the engines that test starts (PYTHONPATH)."""
try:
    import torch

    _current_device_index = torch.accelerator.current_device_index

    def _cpu_or_current():
        return 0 if not torch.accelerator.is_available() else _current_device_index()

    torch.accelerator.current_device_index = _cpu_or_current
except Exception as error:  # the engine then fails with its own message
    import sys

    print(f"cpu_connector_shim: {error}", file=sys.stderr)
