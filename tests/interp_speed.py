"""Test-harness speed-ups for Triton's interpreter (pinned triton 3.6.0), applied by
``tests/conftest.py`` under ``TRITON_INTERPRET=1`` only; compiled kernels are untouched.

Device-function calls: the interpreter re-patches ``triton.language`` each time a kernel calls
an ``@triton.jit`` helper (``InterpretedFunction.__call__`` runs ``_patch_lang``, which walks
every member of ``tl``, ``tl.tensor``, ``tl.math`` and the descriptor class with
``inspect.getmembers``), and never restores those patches. Inside a kernel the launch
(``GridExecutor``) has already patched the same modules, so each re-patch finds the builtins
replaced and changes nothing, while the walk cost about a quarter of the CPU time of the
building-block kernels' tests (the K loop, loaders and epilogue are helpers called per step).
Here a helper call inside a launch skips the walk when every language module its globals name
(the only ones ``_patch_lang`` patches) is already patched in that launch: by the launch itself,
or by an earlier helper call's walk, whose patches the interpreter never restores. Anything else
is patched as before.
"""

from __future__ import annotations

import inspect


def install() -> bool:
    """Install the speed-up; False (and nothing changed) unless the interpreter is triton
    3.6.0's, whose internals this relies on."""
    import triton
    import triton.language as tl
    from triton.runtime import interpreter as interp

    if triton.__version__ != "3.6.0" or getattr(interp, "_convgemm_fast_calls", False):
        return False
    original = interp._patch_lang
    active: list[set] = []  # the language modules patched in each running launch
    langs: dict = {}

    def langs_of(fn) -> frozenset:
        got = langs.get(fn)
        if got is None:
            got = langs[fn] = frozenset(
                id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core)
            )
        return got

    class _Scope:
        def __init__(self, inner) -> None:
            self.inner = inner

        def restore(self) -> None:
            try:
                self.inner.restore()
            finally:
                active.pop()

    def patch_launch(fn):
        scope = original(fn)
        active.append(set(langs_of(fn)))
        return _Scope(scope)

    def device_call(self, *args, **kwargs):
        # rewritten first: the first rewrite adds the interpreter module's globals (``tl`` among
        # them) to the helper's, so its language modules are known for good after it
        fn = self.rewrite()
        mine = langs_of(self.fn)
        if not (active and mine <= active[-1]):
            original(self.fn)
            if active:
                # patched for the rest of the launch: the interpreter never restores a helper
                # call's patches (``triton.language.standard``'s helpers, ``tl.sum`` and
                # ``tl.max``, name ``tl.core``, which a launch from our modules does not patch)
                active[-1] |= mine
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            raise interp.InterpreterError(repr(e)) from e

    interp._patch_lang = patch_launch
    interp.InterpretedFunction.__call__ = device_call
    interp._convgemm_fast_calls = True
    return True
