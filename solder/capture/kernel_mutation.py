"""Which pointer arguments a user-written Triton kernel may write.

Works on the kernel's Python source (AST), so it needs neither a GPU nor a Triton compile and
handles interpreted kernels (TRITON_INTERPRET=1) too. It is an abstract interpretation: every
value carries the set of kernel parameters its address may derive from (its "origins"); a store,
atomic or descriptor store adds the origins of its pointer operand to the written set. Whatever
it cannot follow makes the result uncertain, and then every argument counts as written.
"""
from __future__ import annotations

import ast
import builtins
import functools
import inspect
import sys
import textwrap
import types
import weakref
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

__all__ = ["KernelWrites", "analyze_kernel_writes", "unwrap_kernel", "describe_writes"]


@dataclass(frozen=True)
class KernelWrites:
    written: frozenset[str]   # parameter names the kernel may write through
    certain: bool             # False: caller must treat every tensor argument as written
    reason: str = ""          # why not certain; names the kernel and the construct


# --- abstract values ---------------------------------------------------------------------------
# A token names where an address may come from: a parameter `p` itself, or `p[]`, an element of
# `p` when it is a tuple. Keeping elements apart keeps `base + row * stride` attributed to `base`
# alone even though `row * stride` could be a tuple repeated by a constexpr.

_UNK = "<pointer from a cast>"   # token: an address the analysis cannot attribute
_NO_OBJ = object()               # "no static Python object known"
_E: frozenset = frozenset()


def _param_of(token: str) -> str:
    return token[:-2] if token.endswith("[]") else token


class _Val(NamedTuple):
    origins: frozenset = _E   # tokens the value itself may hold an address from
    elems: frozenset = _E     # tokens reachable only by indexing it (it may be a tuple)
    obj: Any = _NO_OBJ        # the Python object, when statically known (module, jit fn, dtype)

    @property
    def full(self) -> frozenset:
        return self.origins | self.elems


_DATA = _Val()


def _static(obj) -> _Val:
    return _Val(_E, _E, obj)


def _join(a: Optional[_Val], b: Optional[_Val]) -> Optional[_Val]:
    if a is None or a is b:
        return b
    if b is None:
        return a
    return _Val(a.origins | b.origins, a.elems | b.elems, a.obj if a.obj is b.obj else _NO_OBJ)


def _union(vals) -> _Val:
    o = e = _E
    for v in vals:
        o, e = o | v.origins, e | v.elems
    return _Val(o, e)


def _join_envs(envs):
    envs = [e for e in envs if e is not None]
    if not envs:
        return None
    out = dict(envs[0])
    for e in envs[1:]:
        for k, v in e.items():
            out[k] = _join(out.get(k), v)
    return out


def _same_env(a, b) -> bool:
    return a.keys() == b.keys() and all(
        x.origins == y.origins and x.elems == y.elems and x.obj is y.obj
        for x, y in ((a[k], b[k]) for k in a))


class _TLRef(NamedTuple):
    """A callable reached through a triton.language module; classified by name, not identity,
    because the interpreter patches these module attributes while a kernel runs."""
    module: str
    name: str


class _GiveUp(Exception):
    def __init__(self, msg: str, node: Optional[ast.AST] = None):
        super().__init__(msg)
        self.msg, self.node = msg, node


# --- what triton.language functions do ----------------------------------------------------------

_PTR_WRITES = frozenset({"store", "atomic_add", "atomic_max", "atomic_min", "atomic_and",
                         "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas"})
_METHOD_WRITES = _PTR_WRITES | {"scatter"}        # also tensor-descriptor methods
_BASE_FIRST = frozenset({"make_block_ptr", "make_tensor_descriptor",
                         "_experimental_make_tensor_descriptor", "advance"})
# Results are fresh tensors that cannot hold a parameter's address.
_PURE = frozenset({
    "program_id", "num_programs", "arange", "dot", "dot_scaled", "cdiv", "rand", "randn",
    "randint", "rand4x", "randn4x", "randint4x", "philox", "philox_impl", "pair_uniform_to_normal",
    "uint_to_uniform_float", "device_print", "static_print", "static_assert", "device_assert",
    "debug_barrier", "assume", "histogram", "argmax", "argmin", "swizzle2d", "range",
    "static_range", "constexpr", "dtype", "block_type", "num_warps", "num_threads", "smid",
    "globaltimer", "gdc_wait", "gdc_launch_dependents"})
# Results may be (or contain) their inputs' pointers; they write nothing.
_PROP = frozenset({
    "broadcast", "broadcast_to", "reshape", "view", "expand_dims", "trans", "permute", "join",
    "split", "cat", "interleave", "ravel", "flip", "sort", "topk", "gather", "bitonic_merge",
    "max_contiguous", "multiple_of", "max_constancy", "maximum", "minimum", "clamp", "abs",
    "sum", "max", "min", "xor_sum", "reduce_or", "cumsum", "cumprod", "softmax", "sigmoid",
    "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "erf", "floor",
    "ceil", "fma", "div_rn", "fdiv", "umulhi", "add", "sub", "mul", "tuple", "item", "slice",
    "reduce", "associative_scan", "map_elementwise", "T"})
# tl.tensor / descriptor methods that neither write nor escape: result may alias the receiver.
_METHOD_PROP = _PROP | {"advance", "to", "cast", "logical_and", "logical_or", "load", "gather"}
# Attributes of a pointer value that are plain metadata.
_DATA_ATTRS = frozenset({"dtype", "shape", "type", "numel", "ndim", "block_shape", "strides",
                         "element_ty", "value", "primitive_bitwidth", "name", "block_type"})
_NEVER = {"inline_asm_elementwise": "inline assembly (tl.inline_asm_elementwise)",
          "tensor": "a tensor built by hand (tl.tensor)"}

_BUILTIN_PURE = {builtins.range, builtins.len, builtins.isinstance, builtins.print,
                 builtins.hasattr, builtins.type, builtins.str, builtins.repr}
_BUILTIN_PROP = {builtins.min, builtins.max, builtins.abs, builtins.int, builtins.float,
                 builtins.bool, builtins.tuple, builtins.zip, builtins.enumerate,
                 builtins.reversed, builtins.round, builtins.divmod}


@functools.lru_cache(maxsize=None)
def _triton():
    """Triton types, imported late so importing solder does not fix TRITON_INTERPRET."""
    import triton.language as tl
    from triton.runtime import jit
    kinds = [jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        kinds.append(InterpretedFunction)
    except Exception:   # interpreter needs numpy; without it there are no interpreted kernels
        pass
    cexpr = tuple(getattr(jit, n) for n in ("ConstexprFunction", "BoundConstexprFunction")
                  if hasattr(jit, n))
    return tl, tuple(kinds), cexpr


def _is_tl_module(name: str) -> bool:
    return name == "triton.language" or name.startswith("triton.language.")


# --- kernel objects ------------------------------------------------------------------------------

def unwrap_kernel(kernel):
    """The JITFunction / InterpretedFunction under autotune, heuristics and other `.fn` wrappers."""
    jit_kinds = _triton()[1]
    k = kernel
    for _ in range(64):
        if isinstance(k, jit_kinds):
            return k
        k = getattr(k, "fn", None)
        if k is None:
            break
    raise TypeError(f"{kernel!r} is not a Triton kernel (@triton.jit, possibly under "
                    "triton.autotune / triton.heuristics)")


class _Summary(NamedTuple):
    params: tuple
    written: frozenset   # parameter names written through
    sites: frozenset     # per write site, the tokens its pointer may derive from
    ret_o: frozenset     # tokens the return value may hold
    ret_e: frozenset     # tokens reachable by indexing the return value
    certain: bool
    reason: str


# Per function object; weak so kernels defined inside functions can be collected.
_CACHE: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()


def _source(jit):
    """(dedented source starting at the def or its decorators, file line of its first line)."""
    fn = jit.fn
    src = getattr(jit, "src", None)   # JITFunction compiles this (it may have been patched)
    if isinstance(src, str):
        start = getattr(jit, "starting_line_number", fn.__code__.co_firstlineno)
        raw = getattr(jit, "raw_src", None) or []
        skip = next((i for i, line in enumerate(raw) if line.strip().startswith("def ")), 0)
        return textwrap.dedent(src), start + skip
    lines, start = inspect.getsourcelines(fn)
    return textwrap.dedent("".join(lines)), start


def _param_names(fn) -> tuple:
    try:
        return tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return ()


def _summarize(jit, stack: tuple) -> _Summary:
    fn = jit.fn
    src_attr = getattr(jit, "src", None)
    src_attr = src_attr if isinstance(src_attr, str) else None
    try:
        hit = _CACHE.get(fn)
    except TypeError:          # not weak-referenceable: analyze without caching
        hit = None
    if hit is not None and hit[0] == src_attr:
        return hit[1]
    name = getattr(fn, "__name__", repr(fn))
    try:
        src, first_line = _source(jit)
    except (OSError, TypeError) as e:
        summary = _Summary(_param_names(fn), _E, _E, _E, _E, False,
                           f"kernel `{name}`: source not available ({e})")
    else:
        summary = _Analyzer(fn, src, first_line, stack).run()
    try:
        _CACHE[fn] = (src_attr, summary)
    except TypeError:
        pass
    return summary


def analyze_kernel_writes(kernel) -> KernelWrites:
    """Which parameters `kernel` may write through. Never raises; uncertain results list every
    parameter as written."""
    try:
        jit = unwrap_kernel(kernel)
    except TypeError as e:
        return KernelWrites(frozenset(), False, str(e))
    s = _summarize(jit, ())
    if s.certain:
        return KernelWrites(frozenset(s.written), True, "")
    return KernelWrites(frozenset(s.params), False, s.reason)


def describe_writes(kernel) -> str:
    """One line for reports, e.g. "add_kernel writes out_ptr"."""
    try:
        name = unwrap_kernel(kernel).fn.__name__
    except (TypeError, AttributeError):
        name = getattr(kernel, "__name__", type(kernel).__name__)
    w = analyze_kernel_writes(kernel)
    if not w.certain:
        return f"{name} may write every tensor argument (analysis uncertain: {w.reason})"
    if not w.written:
        return f"{name} writes nothing"
    return f"{name} writes {', '.join(sorted(w.written))}"


# --- the analysis of one function ----------------------------------------------------------------

class _Analyzer:
    def __init__(self, fn, src: str, first_line: int, stack: tuple):
        self.fn, self.src, self.first_line = fn, src, first_line
        self.stack = stack + (fn,)
        self.name = getattr(fn, "__name__", "?")
        self.file = getattr(getattr(fn, "__code__", None), "co_filename", "?")
        self.globals = getattr(fn, "__globals__", {})
        self.closure = {}
        code = getattr(fn, "__code__", None)
        for var, cell in zip(code.co_freevars if code else (), getattr(fn, "__closure__", None) or ()):
            try:
                self.closure[var] = cell.cell_contents
            except ValueError:   # empty cell: not bound yet
                pass
        self.written: set = set()
        self.sites: set = set()
        self.ret_o: set = set()
        self.ret_e: set = set()
        self.loops: list = []       # per enclosing loop: (break envs, continue envs)
        self.params: tuple = ()
        self.locals: set = set()

    def run(self) -> _Summary:
        try:
            fdef = self._parse()
            env = self._enter(fdef)
            self._block(fdef.body, env)
            return _Summary(self.params, frozenset(self.written), frozenset(self.sites),
                            frozenset(self.ret_o), frozenset(self.ret_e), True, "")
        except _GiveUp as g:
            where = ""
            if g.node is not None and hasattr(g.node, "lineno"):
                where = f" (at {self.file}:{self.first_line + g.node.lineno - 1})"
            reason = f"kernel `{self.name}`: {g.msg}{where}"
        except Exception as e:   # a bug here must not turn into a missed write
            reason = f"kernel `{self.name}`: analysis failed ({type(e).__name__}: {e})"
        return _Summary(self.params or _param_names(self.fn), _E, _E, _E, _E, False, reason)

    def _parse(self) -> ast.FunctionDef:
        tree = ast.parse(self.src)
        fdef = tree.body[0] if tree.body else None
        if not isinstance(fdef, ast.FunctionDef):
            raise _GiveUp("source is not a plain function definition")
        return fdef

    def _enter(self, fdef: ast.FunctionDef) -> dict:
        a = fdef.args
        if a.vararg or a.kwarg:
            raise _GiveUp("*args / **kwargs parameters", fdef)
        env = {}
        params = a.posonlyargs + a.args + a.kwonlyargs
        self.params = tuple(p.arg for p in params)
        for p in params:
            ann = p.annotation
            is_cexpr = ann is not None and "constexpr" in ast.unparse(ann)
            # A constexpr is never a pointer. Any other parameter may be one, or a tuple of them.
            env[p.arg] = _DATA if is_cexpr else \
                _Val(frozenset((p.arg,)), frozenset((p.arg + "[]",)))
        self.locals = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)
                       and isinstance(n.ctx, (ast.Store, ast.Del))}
        return env

    # statements ----------------------------------------------------------------------------

    def _block(self, stmts, env):
        for s in stmts:
            if env is None:      # after return/break/continue: never runs
                return None
            env = self._stmt(s, env)
        return env

    def _stmt(self, s, env):
        t = type(s)
        if t is ast.Expr:
            self._eval(s.value, env)
        elif t is ast.Assign:
            if len(s.targets) == 1:
                self._assign(s.targets[0], s.value, env)
            else:
                v = self._eval(s.value, env)
                for tgt in s.targets:
                    self._bind(tgt, v, env)
        elif t is ast.AnnAssign:
            if s.value is not None:
                self._assign(s.target, s.value, env)
        elif t is ast.AugAssign:
            if not isinstance(s.target, ast.Name):
                raise _GiveUp("augmented assignment into an attribute or subscript", s)
            old = self._name(s.target.id, env, s.target)
            env[s.target.id] = self._binop(s.op, old, self._eval(s.value, env))
        elif t is ast.If:
            self._eval(s.test, env)
            return _join_envs([self._block(s.body, dict(env)), self._block(s.orelse, dict(env))])
        elif t is ast.For:
            it = self._eval(s.iter, env)
            item = _Val(it.full, it.full)

            def enter(e):
                self._bind(s.target, item, e)
                return e
            return self._loop(env, s, enter)
        elif t is ast.While:
            def enter(e):
                self._eval(s.test, e)
                return e
            return self._loop(env, s, enter)
        elif t in (ast.Break, ast.Continue):
            if not self.loops:
                raise _GiveUp("break/continue outside a loop", s)
            self.loops[-1][0 if t is ast.Break else 1].append(env)
            return None
        elif t is ast.Return:
            if s.value is not None:
                v = self._eval(s.value, env)
                self.ret_o |= v.origins
                self.ret_e |= v.elems
            return None
        elif t is ast.Assert:
            self._eval(s.test, env)
            if s.msg is not None:
                self._eval(s.msg, env)
        elif t is ast.With:
            for item in s.items:
                v = self._eval(item.context_expr, env)
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, v, env)
            return self._block(s.body, env)
        elif t is ast.Delete:
            for tgt in s.targets:
                if not isinstance(tgt, ast.Name):
                    raise _GiveUp("del of an attribute or subscript", s)
                env.pop(tgt.id, None)
        elif t is ast.Raise:
            if s.exc is not None:
                self._eval(s.exc, env)
            return None
        elif t is not ast.Pass:
            raise _GiveUp(f"unsupported statement `{t.__name__}`", s)
        return env

    def _loop(self, env, s, enter):
        # Iterate the body to a fixpoint; values only grow and the origin sets are finite.
        head = env
        for _ in range(256):
            self.loops.append(([], []))
            end = self._block(s.body, enter(dict(head)))
            breaks, conts = self.loops.pop()
            new_head = _join_envs([head, end, *conts])
            if _same_env(new_head, head):
                break
            head = new_head
        else:
            raise _GiveUp("loop analysis did not converge", s)
        done = self._block(s.orelse, enter(dict(head)))   # normal exit, then the else clause
        return _join_envs([done, *breaks])

    def _assign(self, target, value, env):
        # `a, b = x, y` binds pairwise; anything else binds every name to the whole value.
        if (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
                and len(target.elts) == len(value.elts)
                and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)):
            vals = [self._eval(e, env) for e in value.elts]
            for tgt, v in zip(target.elts, vals):
                self._bind(tgt, v, env)
        else:
            self._bind(target, self._eval(value, env), env)

    def _bind(self, target, v: _Val, env):
        if isinstance(target, ast.Name):
            env[target.id] = v
        elif isinstance(target, (ast.Tuple, ast.List)):
            part = _Val(v.full, v.full)
            for e in target.elts:
                self._bind(e.value if isinstance(e, ast.Starred) else e, part, env)
        else:
            raise _GiveUp("value stored into an attribute or container", target)

    # expressions ---------------------------------------------------------------------------

    def _name(self, name, env, node) -> _Val:
        v = env.get(name)
        if v is not None:
            return v
        try:
            g = _static(self._lookup(name))
        except KeyError:
            g = None
        if name in self.locals:
            # Not assigned yet on this path (e.g. first pass over a loop); Triton then falls
            # back to the global of that name.
            return g if g is not None else _DATA
        if g is None:
            raise _GiveUp(f"name `{name}` cannot be resolved", node)
        return g

    def _lookup(self, name):
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise KeyError(name)

    def _eval(self, n, env) -> _Val:
        t = type(n)
        if t is ast.Name:
            return self._name(n.id, env, n)
        if t is ast.Constant:
            return _static(n.value)
        if t is ast.Attribute:
            return self._attr(self._eval(n.value, env), n.attr, n)
        if t is ast.Call:
            return self._call(n, env)
        if t is ast.BinOp:
            return self._binop(n.op, self._eval(n.left, env), self._eval(n.right, env))
        if t is ast.UnaryOp:
            v = self._eval(n.operand, env)
            return v if isinstance(n.op, ast.UAdd) else _DATA
        if t is ast.BoolOp:   # `a or b` evaluates to one of its operands
            vals = [self._eval(x, env) for x in n.values]
            return _union(vals)
        if t is ast.Compare:
            for x in [n.left, *n.comparators]:
                self._eval(x, env)
            return _DATA
        if t is ast.IfExp:
            self._eval(n.test, env)
            return _join(self._eval(n.body, env), self._eval(n.orelse, env))
        if t in (ast.Tuple, ast.List):
            vals = [self._eval(e.value if isinstance(e, ast.Starred) else e, env) for e in n.elts]
            u = _union(vals)
            return _Val(u.origins, u.full)
        if t is ast.Subscript:
            v = self._eval(n.value, env)
            self._eval(n.slice, env)
            return _Val(v.full, v.full)
        if t is ast.Slice:
            for part in (n.lower, n.upper, n.step):
                if part is not None:
                    self._eval(part, env)
            return _DATA
        if t is ast.JoinedStr:
            for part in n.values:
                self._eval(part, env)
            return _static("")
        if t is ast.FormattedValue:
            self._eval(n.value, env)
            return _DATA
        if t is ast.NamedExpr:
            v = self._eval(n.value, env)
            env[n.target.id] = v
            return v
        raise _GiveUp(f"unsupported expression `{t.__name__}`", n)

    @staticmethod
    def _binop(op, a: _Val, b: _Val) -> _Val:
        if isinstance(op, ast.Add):        # ptr + int, int + ptr, tuple + tuple
            return _Val(a.origins | b.origins, a.elems | b.elems)
        if isinstance(op, ast.Sub):        # only ptr - int keeps a pointer
            return _Val(a.origins, a.elems)
        if isinstance(op, ast.Mult):       # never a pointer, but tuple * constexpr repeats a tuple
            return _Val(_E, a.full | b.full)
        return _DATA                       # Triton rejects pointers in every other operator

    def _attr(self, v: _Val, attr: str, node) -> _Val:
        obj = v.obj
        if obj is not _NO_OBJ:
            if isinstance(obj, types.ModuleType):
                if not hasattr(obj, attr):
                    raise _GiveUp(f"`{obj.__name__}.{attr}` does not exist", node)
                val = getattr(obj, attr)
                if _is_tl_module(obj.__name__) and callable(val) \
                        and not isinstance(val, types.ModuleType):
                    return _static(_TLRef(obj.__name__, attr))
                return _static(val)
            if isinstance(obj, _TLRef):
                raise _GiveUp(f"attribute `.{attr}` of `{obj.name}`", node)
            try:
                return _static(getattr(obj, attr))
            except Exception:
                return _DATA
        if attr in _DATA_ATTRS:
            return _DATA
        if attr == "T":
            return _Val(v.origins, v.elems)
        if v.full:
            raise _GiveUp(f"attribute `.{attr}` of a value that may hold a pointer", node)
        return _DATA

    # calls ---------------------------------------------------------------------------------

    def _call(self, n: ast.Call, env) -> _Val:
        args = []
        for a in n.args:
            if isinstance(a, ast.Starred):
                raise _GiveUp("call with *args", n)
            args.append(self._eval(a, env))
        kwargs = {}
        for k in n.keywords:
            if k.arg is None:
                raise _GiveUp("call with **kwargs", n)
            kwargs[k.arg] = self._eval(k.value, env)
        if isinstance(n.func, ast.Attribute):
            recv = self._eval(n.func.value, env)
            if recv.obj is _NO_OBJ:
                return self._method(n.func.attr, recv, args, kwargs, n)
            f = self._attr(recv, n.func.attr, n.func)
        else:
            f = self._eval(n.func, env)
        if f.obj is _NO_OBJ:
            raise _GiveUp(f"call of `{ast.unparse(n.func)}`, which cannot be resolved", n)
        return self._static_call(f.obj, args, kwargs, n)

    def _static_call(self, obj, args, kwargs, n) -> _Val:
        tl, jit_kinds, cexpr_kinds = _triton()
        if not isinstance(obj, _TLRef):
            inner = getattr(obj, "fn", None) if isinstance(obj, jit_kinds) else obj
            mod = getattr(inner, "__module__", None) or ""
            if _is_tl_module(mod) and hasattr(inner, "__name__"):
                obj = _TLRef(mod, inner.__name__)   # imported from triton.language directly
        if isinstance(obj, _TLRef):
            return self._tl_call(obj, args, kwargs, n)
        if isinstance(obj, jit_kinds):
            return self._jit_call(obj, args, kwargs, n)
        if cexpr_kinds and isinstance(obj, cexpr_kinds):
            return _DATA   # runs on constexprs at compile time
        if any(obj is b for b in (builtins.getattr, builtins.setattr, builtins.exec,
                                  builtins.eval, builtins.globals, builtins.locals, builtins.vars)):
            raise _GiveUp(f"call of `{obj.__name__}`", n)
        allv = [*args, *kwargs.values()]
        self._check_callables(allv, n)
        if any(obj is b for b in _BUILTIN_PURE):
            return _DATA
        if any(obj is b for b in _BUILTIN_PROP):
            return _union(allv)
        if any(v.full for v in allv):
            what = getattr(obj, "__name__", type(obj).__name__)
            raise _GiveUp(f"call of non-Triton function `{what}` on a value that may hold a "
                          "pointer", n)
        return _DATA

    def _tl_call(self, ref: _TLRef, args, kwargs, n) -> _Val:
        name = ref.name

        def arg(i, kw):
            v = args[i] if i < len(args) else kwargs.get(kw)
            if v is None:
                raise _GiveUp(f"`{name}` called without its `{kw}` argument", n)
            return v

        allv = [*args, *kwargs.values()]
        if name in _NEVER:
            raise _GiveUp(_NEVER[name], n)
        if "libdevice" in ref.module or ref.module == "triton.language.math":
            return _union(allv)   # elementwise math: pure
        if name in _PTR_WRITES:
            self._write(arg(0, "pointer"), name, n)
            return _DATA
        if name == "store_tensor_descriptor":
            self._write(arg(0, "desc"), name, n)
            return _DATA
        if name in ("load", "load_tensor_descriptor"):
            return self._loaded(arg(0, "desc" if name != "load" else "pointer"))
        if name in _BASE_FIRST:
            return _Val(arg(0, "base").origins)
        if name == "where":
            return _union([arg(1, "x"), arg(2, "y")])
        if name == "cast":
            return _Val(arg(0, "input").origins | self._dtype_origins(arg(1, "dtype")))
        if name == "full":
            return _Val(self._dtype_origins(arg(2, "dtype")))
        if name == "zeros":
            return _Val(self._dtype_origins(arg(1, "dtype")))
        if name == "zeros_like":   # null pointers when given pointers: unattributable
            return _Val(frozenset((_UNK,)) if arg(0, "input").origins else _E)
        if name == "pointer_type":
            return _Val(frozenset((_UNK,)))
        self._check_callables(allv, n)
        if name in _PURE or ref.module == "triton.language.random":
            return _DATA
        if name in _PROP:
            return _union(allv)
        target = getattr(sys.modules.get(ref.module), name, None)
        if isinstance(target, _triton()[1]):   # a standard-library @jit helper: read its source
            return self._jit_call(target, args, kwargs, n)
        if any(v.full for v in allv):
            raise _GiveUp(f"`{ref.module}.{name}` is not known to the analysis and gets a "
                          "value that may hold a pointer", n)
        return _DATA

    def _method(self, name, recv: _Val, args, kwargs, n) -> _Val:
        allv = [*args, *kwargs.values()]
        if name in _METHOD_WRITES:
            self._write(recv, f".{name}", n)
            return _DATA
        if name == "load":
            return self._loaded(recv)
        if name in ("to", "cast"):
            dt = args[0] if args else kwargs.get("dtype")
            return _Val(recv.origins | (self._dtype_origins(dt) if dt is not None else _E))
        if name in _METHOD_PROP:
            self._check_callables(allv, n)
            return _union([recv, *allv])
        if recv.full or any(v.full for v in allv):
            raise _GiveUp(f"unknown method `.{name}` on a value that may hold a pointer", n)
        return _DATA

    def _jit_call(self, jit, args, kwargs, n) -> _Val:
        fn = jit.fn
        if fn in self.stack:
            raise _GiveUp(f"recursive call of `{fn.__name__}`", n)
        s = _summarize(jit, self.stack)
        if not s.certain:
            raise _GiveUp(f"calls `{fn.__name__}`, which cannot be analyzed: {s.reason}", n)
        if len(args) > len(s.params) or any(k not in s.params for k in kwargs):
            raise _GiveUp(f"call of `{fn.__name__}` does not match its parameters", n)
        bound = dict(zip(s.params, args))
        bound.update(kwargs)
        for site in s.sites:
            self._write(_Val(self._map(site, bound)),
                        f"`{fn.__name__}` (through its {', '.join(sorted(site))})", n)
        return _Val(self._map(s.ret_o, bound), self._map(s.ret_e, bound))

    @staticmethod
    def _map(tokens, bound) -> frozenset:
        """A callee's tokens in terms of the caller's: `p` is the argument, `p[]` its elements."""
        out = set()
        for t in tokens:
            if t == _UNK:
                out.add(t)
            elif t.endswith("[]"):
                v = bound.get(t[:-2])
                out.update(v.full if v is not None else ())
            elif t in bound:
                out.update(bound[t].origins)
        return frozenset(out)

    # helpers -------------------------------------------------------------------------------

    def _write(self, ptr: _Val, what: str, node):
        o = ptr.origins
        if _UNK in o:
            raise _GiveUp(f"{what} writes through a pointer made by a cast", node)
        if not o:
            raise _GiveUp(f"{what} writes through a value not traced to any parameter", node)
        self.written.update(_param_of(t) for t in o)
        self.sites.add(o)

    @staticmethod
    def _loaded(ptr: _Val) -> _Val:
        # A load yields data, never a parameter's address; only a pointer that was already
        # unattributable can yield unattributable pointers (pointer-to-pointer memory).
        return _Val(frozenset((_UNK,)) if _UNK in ptr.origins else _E)

    @staticmethod
    def _dtype_origins(dt: _Val) -> frozenset:
        """A cast to a dtype not known to be a non-pointer type may forge an address."""
        tl = _triton()[0]
        obj = dt.obj
        if isinstance(obj, tl.dtype) and not obj.scalar.is_ptr():
            return _E
        return frozenset((_UNK,))

    def _check_callables(self, vals, n):
        # A function passed as an argument (combine_fn, scalar_fn) must not write.
        jit_kinds = _triton()[1]
        for v in vals:
            obj = v.obj
            if isinstance(obj, _TLRef) and (obj.name in _PTR_WRITES or obj.name in _NEVER):
                raise _GiveUp(f"`{obj.name}` passed as a function argument", n)
            if isinstance(obj, jit_kinds):
                if obj.fn in self.stack:
                    raise _GiveUp(f"recursive use of `{obj.fn.__name__}`", n)
                s = _summarize(obj, self.stack)
                if not s.certain or s.written:
                    raise _GiveUp(f"`{obj.fn.__name__}` passed as a function argument may "
                                  "write memory", n)
