"""The kernels papermill runs the workbook's notebooks in.

Each kernel runs over IPC rather than TCP (`kernel_manager_class`). By default every notebook gets a fresh kernel;
a profile whose `run_all:` settings say `kernel: shared` (the quick profile) runs them all in one `SharedKernel`,
its namespace reset between notebooks, so that a run pays for a kernel's start-up and the imports of torch,
transformers and the workbook once rather than once per notebook (about 10 s each on the 2-core host).
"""
from __future__ import annotations

import functools
import os
import uuid

IPC_PATH_MAX = 100  # bytes: a Unix socket's path must fit sockaddr_un.sun_path (108 on Linux, 104 on macOS)


@functools.cache
def kernel_manager_class() -> type:
    """The kernel manager papermill (nbclient) starts each notebook's kernel with: jupyter_client's
    AsyncKernelManager over IPC transport (Unix sockets) instead of TCP on localhost, where ipykernel warns that
    the unencrypted traffic could be read by anyone on the machine. As Jupyter's own server does, the connection
    file goes into Jupyter's runtime directory (private to the user) and the sockets beside it
    (`<runtime>/kernel-<id>-ipc-<n>`), removed at shutdown with the file. TCP where zmq has no IPC (Windows) or
    the sockets' path would be too long for one (a runtime directory deep down, IPC_PATH_MAX). No interrupt at
    shutdown (see `_async_interrupt_kernel`)."""
    import zmq
    from jupyter_client import AsyncKernelManager
    from jupyter_core.paths import jupyter_runtime_dir
    from jupyter_core.utils import ensure_dir_exists
    from traitlets import default

    class IPCKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self) -> str:
            sockets = os.path.splitext(self.connection_file)[0] + "-ipc-99"
            return "ipc" if zmq.has("ipc") and len(os.fsencode(sockets)) <= IPC_PATH_MAX else "tcp"

        @default("connection_file")
        def _connection_file_default(self) -> str:
            runtime = jupyter_runtime_dir()
            ensure_dir_exists(runtime, 0o700)
            return os.path.join(runtime, f"kernel-{uuid.uuid4()}.json")

        async def _async_interrupt_kernel(self) -> None:
            # no SIGINT before the shutdown request: after the last cell it can only land in an idle handler and
            # print "KeyboardInterrupt caught in kernel" (a race); the request, then a kill, stop a busy kernel anyway
            if not self.shutting_down:
                await super()._async_interrupt_kernel()

    return IPCKernelManager


# what runs between two notebooks in a shared kernel: every name the last one made is gone (its models freed), its
# figures closed; modules stay imported (that is the point), and each notebook imports what it uses itself
RESET = "%reset -f\nimport gc as _gc, matplotlib.pyplot as _plt\n_plt.close('all')\ndel _plt\n_gc.collect()\ndel _gc"


class SharedKernel:
    """One kernel for every notebook of a run: started by the first notebook papermill runs in it (`km`), its
    namespace reset (RESET) before each later one, shut down by `close`. A notebook must not rely on another's
    state: each imports and loads what it uses, as in a fresh kernel (the default profile runs each notebook in one,
    which is what RESULTS.md is made from)."""

    def __init__(self) -> None:
        self.km = kernel_manager_class()(kernel_name="python3")

    def reset(self) -> None:
        """Clear what the previous notebook left (nothing to do before the first)."""
        if not self.km.has_kernel:
            return
        import nbformat
        from nbclient import NotebookClient

        NotebookClient(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(RESET)]), km=self.km).execute()

    def close(self) -> None:
        from jupyter_core.utils import run_sync

        if self.km.has_kernel:
            run_sync(self.km.shutdown_kernel)(now=True)


__all__ = ["IPC_PATH_MAX", "kernel_manager_class", "RESET", "SharedKernel"]
