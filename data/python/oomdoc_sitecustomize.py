# oomdoc's injected sitecustomize, written to a temporary directory that `oomdoc run
# --snapshot-on-oom DIR` puts first on PYTHONPATH. The user's script is not changed.
#
# When the program imports torch and CUDA initialises, it records the CUDA caching allocator's
# history (bounded: OOMDOC_SNAPSHOT_MAX_ENTRIES events), and on the first out-of-memory error it
# dumps a memory snapshot pickle into OOMDOC_SNAPSHOT_DIR (the format `oomdoc snapshot` reads).
# It prints nothing: it reports to oomdoc through status files in OOMDOC_HOOK_STATUS_DIR, and
# oomdoc says once, after the run, what happened (no torch, no CUDA, snapshot written).
#
# Then it runs the sitecustomize that would have run without it (Debian ships one), if any.
#
# Sources: torch.cuda.memory._record_memory_history / _dump_snapshot and the out-of-memory
# observer, as in PyTorch's "Understanding CUDA Memory Usage" guide (torch_cuda_memory.rst).


def _oomdoc_install():
    import os
    import sys

    status_dir = os.environ.get("OOMDOC_HOOK_STATUS_DIR")
    snapshot_dir = os.environ.get("OOMDOC_SNAPSHOT_DIR")
    if not status_dir or not snapshot_dir:
        return
    try:
        max_entries = int(os.environ.get("OOMDOC_SNAPSHOT_MAX_ENTRIES", "100000"))
    except ValueError:
        max_entries = 100000
    state = {"torch": None, "armed": False, "dumped": False}

    def status(line):
        try:
            path = os.path.join(status_dir, "status-%d.txt" % os.getpid())
            with open(path, "a") as f:
                f.write(line + "\n")
        except OSError:
            pass

    status("loaded")

    def dump(torch, reason):
        if state["dumped"]:
            return
        state["dumped"] = True
        import time

        path = os.path.join(snapshot_dir, "oom-snapshot-%d-%d.pickle" % (os.getpid(), int(time.time())))
        try:
            memory = torch.cuda.memory
            if hasattr(memory, "_dump_snapshot"):
                memory._dump_snapshot(path)
            else:  # torch < 2.1
                import pickle

                with open(path, "wb") as f:
                    pickle.dump(memory._snapshot(), f)
            status("snapshot %s" % path)
        except Exception as e:  # the program's own error matters more than ours
            status("error cannot write a snapshot (%s): %r" % (reason, e))

    def is_oom(torch, exc):
        for owner in (torch, getattr(torch, "cuda", None)):
            kind = getattr(owner, "OutOfMemoryError", None)
            if isinstance(kind, type) and isinstance(exc, kind):
                return True
        return isinstance(exc, RuntimeError) and "CUDA out of memory" in str(exc)

    def arm():
        # Runs when CUDA initialises (torch.cuda._lazy_call), so importing torch does not force
        # CUDA initialisation, which would break programs that fork workers before using CUDA.
        torch = state["torch"]
        if state["armed"]:
            return
        state["armed"] = True
        version = getattr(torch, "__version__", "?")
        record = torch.cuda.memory._record_memory_history
        try:
            try:
                record(enabled="all", context="all", stacks="all", max_entries=max_entries)
            except TypeError:  # torch < 2.1
                record(True, trace_alloc_max_entries=max_entries, trace_alloc_record_context=True)
            status("recording torch=%s max_entries=%d" % (version, max_entries))
        except Exception as e:
            status("error cannot record memory history with torch %s: %r" % (version, e))
            return
        attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
        if attach is not None:  # torch >= 2.0: called by the allocator at the moment of the OOM
            try:
                attach(lambda device, alloc, device_alloc, device_free: dump(torch, "observer"))
            except Exception:
                pass

    def on_torch_imported(torch):
        state["torch"] = torch
        status("torch %s" % getattr(torch, "__version__", "?"))
        try:
            torch.cuda._lazy_call(arm)
        except Exception as e:
            status("error cannot hook CUDA initialisation: %r" % (e,))

    # Catches OOMs the observer missed (older torch) and lets the program print its traceback.
    previous_hook = sys.excepthook

    def excepthook(kind, value, traceback):
        torch = state["torch"]
        if torch is not None and state["armed"] and is_oom(torch, value):
            dump(torch, "excepthook")
        previous_hook(kind, value, traceback)

    sys.excepthook = excepthook

    def at_exit():
        torch = state["torch"]
        if torch is None:
            status("no-torch")
        elif not state["armed"]:
            version = getattr(torch, "__version__", "?")
            if getattr(getattr(torch, "version", None), "cuda", None) is None:
                status("no-cuda torch=%s" % version)
            else:
                status("cuda-unused torch=%s" % version)

    import atexit

    atexit.register(at_exit)

    class TorchImportWatcher:
        # A meta-path finder that lets the normal machinery find torch, then runs
        # on_torch_imported once the module has finished executing.
        def find_spec(self, name, path=None, target=None):
            if name != "torch":
                return None
            try:
                sys.meta_path.remove(self)
            except ValueError:
                pass
            import importlib.util

            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return None
            original = spec.loader.exec_module

            def exec_module(module):
                original(module)
                try:
                    on_torch_imported(module)
                except Exception as e:
                    status("error %r" % (e,))

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, TorchImportWatcher())


def _oomdoc_chain():
    # Run the next sitecustomize on sys.path, the one Python would have run without us.
    import importlib
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    saved_path = sys.path[:]
    ours = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        importlib.import_module("sitecustomize")
    except ImportError as e:
        if getattr(e, "name", None) != "sitecustomize":
            raise
    finally:
        sys.path[:] = saved_path
        if ours is not None:
            sys.modules["sitecustomize"] = ours


try:
    _oomdoc_install()
except Exception:  # never break the user's program
    pass
_oomdoc_chain()
