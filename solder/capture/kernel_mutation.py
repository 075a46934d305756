"""Which pointer arguments a user-written Triton kernel may write.

Reads the kernel's Python source (AST), so it needs neither a GPU nor a Triton compile and works
for interpreted kernels (TRITON_INTERPRET=1) too. It is an abstract interpretation: every value
carries the kernel parameters its address may derive from; a store, atomic or descriptor store
adds those of its pointer operand to the written set. Anything it cannot follow makes the result
uncertain, and then every argument counts as written.

Which parameters are pointers is unknown from source alone, so an integer parameter added to a
pointer (`out_ptr + start`) is reported as written too; callers keep only the tensor arguments.
Addresses smuggled in as integers and cast back (`tl.pointer_type`) make the result uncertain.
Results are cached per function; redefining a helper a cached kernel calls is not noticed.
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


# --- abstract values -----------------------------------------------------------------------------
# A token says where an address may come from: parameter `p` itself, or `p[]`, an element of `p`
# when it is a tuple. Keeping elements apart keeps `base + row * stride` attributed to `base` only,
# although `row * stride` could be a tuple repeated by a constexpr.

_UNK = "<cast>"            # token of an address the analysis cannot attribute
_NO_OBJ = object()         # "no static Python object known"
_E: frozenset = frozenset()
_UNKS = frozenset((_UNK,))


class _Val(NamedTuple):
    origins: frozenset = _E   # tokens the value itself may hold an address from
    elems: frozenset = _E     # tokens reachable only by indexing it
    obj: Any = _NO_OBJ        # the Python object when statically known (module, jit fn, dtype)

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
    envs = [e for e in envs if e is not None]   # None: that path never gets here
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
    """A callable of a triton.language module, classified by name rather than identity because
    the interpreter swaps these module attributes while a kernel runs."""
    module: str
    name: str


class _GiveUp(Exception):
    def __init__(self, msg: str, node: Optional[ast.AST] = None):
        super().__init__(msg)
        self.msg, self.node = msg, node


# --- what triton.language functions do -----------------------------------------------------------

_PTR_WRITES = frozenset({"store", "atomic_add", "atomic_max", "atomic_min", "atomic_and",
                         "atomic_or", "atomic_xor", "atomic_xchg", "atomic_cas"})
_METHOD_WRITES = _PTR_WRITES | {"scatter"}            # tensor and tensor-descriptor methods
_BASE_FIRST = frozenset({"make_block_ptr", "make_tensor_descriptor",
                         "_experimental_make_tensor_descriptor", "advance"})
# Results are fresh values that cannot hold a parameter's address.
_PURE = frozenset({
    "program_id", "num_programs", "arange", "dot", "dot_scaled", "cdiv", "rand", "randn",
    "randint", "rand4x", "randn4x", "randint4x", "philox", "philox_impl", "pair_uniform_to_normal",
    "uint_to_uniform_float", "device_print", "static_print", "static_assert", "device_assert",
    "debug_barrier", "assume", "histogram", "argmax", "argmin", "swizzle2d", "range",
    "static_range", "constexpr", "dtype", "block_type", "num_warps", "num_threads", "smid",
    "globaltimer", "gdc_wait", "gdc_launch_dependents"})
# Results may be or contain their inputs' pointers; nothing is written.
_PROP = frozenset({
    "broadcast", "broadcast_to", "reshape", "view", "expand_dims", "trans", "permute", "join",
    "split", "cat", "interleave", "ravel", "flip", "sort", "topk", "gather", "bitonic_merge",
    "max_contiguous", "multiple_of", "max_constancy", "maximum", "minimum", "clamp", "abs",
    "sum", "max", "min", "xor_sum", "reduce_or", "cumsum", "cumprod", "softmax", "sigmoid",
    "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn", "rsqrt", "sin", "cos", "erf", "floor",
    "ceil", "fma", "div_rn", "fdiv", "umulhi", "add", "sub", "mul", "tuple", "item", "slice",
    "reduce", "associative_scan", "map_elementwise"})
_METHOD_PROP = _PROP | _PURE | {"advance", "logical_and", "logical_or"}
# Attributes of a possible pointer that are plain metadata.
_DATA_ATTRS = frozenset({"dtype", "shape", "type", "numel", "ndim", "block_shape", "strides",
                         "element_ty", "value", "primitive_bitwidth", "name", "block_type"})
_NEVER = {"inline_asm_elementwise": "inline assembly (tl.inline_asm_elementwise)",
          "tensor": "a tensor built by hand (tl.tensor)"}
_DATA_EXPRS = (ast.Compare, ast.Slice, ast.JoinedStr, ast.FormattedValue)
_B = builtins
_BUILTIN_NEVER = (_B.getattr, _B.setattr, _B.delattr, _B.exec, _B.eval, _B.compile, _B.globals,
                  _B.locals, _B.vars, _B.__import__)
_BUILTIN_PURE = (_B.range, _B.len, _B.isinstance, _B.print, _B.hasattr, _B.type, _B.str, _B.repr)
_BUILTIN_PROP = (_B.min, _B.max, _B.abs, _B.int, _B.float, _B.bool, _B.tuple, _B.zip,
                 _B.enumerate, _B.reversed, _B.round, _B.divmod)


@functools.lru_cache(maxsize=None)
def _triton():
    """Triton's types, imported late so importing solder does not fix TRITON_INTERPRET."""
    import triton.language as tl
    from triton.runtime import jit
    kinds = [jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        kinds.append(InterpretedFunction)
    except Exception:   # the interpreter needs numpy; without it no kernel is interpreted
        pass
    cexpr = tuple(getattr(jit, n) for n in ("ConstexprFunction", "BoundConstexprFunction")
                  if hasattr(jit, n))
    return tl, tuple(kinds), cexpr


def _is_tl_module(name: str) -> bool:
    return name == "triton.language" or name.startswith("triton.language.")


def _is(obj, candidates) -> bool:
    return any(obj is c for c in candidates)   # identity: `==` on Triton objects is overloaded


# --- kernels and the cache -----------------------------------------------------------------------

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


# Per Python function; weak so that kernels defined inside functions can be collected.
_CACHE: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()


def _param_names(fn) -> tuple:
    try:
        return tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return ()


def _source(jit):
    """(dedented source, file line of its first line)."""
    fn = jit.fn
    src = getattr(jit, "src", None)   # a JITFunction compiles this, which may have been patched
    if isinstance(src, str):
        raw = getattr(jit, "raw_src", None) or []
        skip = next((i for i, line in enumerate(raw) if line.strip().startswith("def ")), 0)
        return textwrap.dedent(src), getattr(jit, "starting_line_number", 1) + skip
    lines, start = inspect.getsourcelines(fn)
    return textwrap.dedent("".join(lines)), start


def _summarize(jit, stack: tuple) -> _Summary:
    fn = jit.fn
    src_attr = getattr(jit, "src", None)
    src_attr = src_attr if isinstance(src_attr, str) else None
    try:
        hit = _CACHE.get(fn)
    except TypeError:   # not weak-referenceable: analyze without caching
        hit = None
    if hit is not None and hit[0] == src_attr:
        return hit[1]
    try:
        src, first_line = _source(jit)
    except (OSError, TypeError) as e:
        name = getattr(fn, "__name__", repr(fn))
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
    """Which parameters `kernel` may write through. Never raises; an uncertain result lists every
    parameter as written."""
    try:
        jit = unwrap_kernel(kernel)
    except TypeError as e:
        return KernelWrites(frozenset(), False, str(e))
    s = _summarize(jit, ())
    if s.certain:
        return KernelWrites(s.written, True, "")
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
    return f"{name} writes {', '.join(sorted(w.written)) or 'nothing'}"


# --- the analysis of one function ----------------------------------------------------------------

class _Analyzer:
    def __init__(self, fn, src: str, first_line: int, stack: tuple):
        self.fn, self.src, self.first_line = fn, src, first_line
        self.stack = stack + (fn,)   # functions being analyzed: the recursion guard
        self.name = getattr(fn, "__name__", "?")
        code = getattr(fn, "__code__", None)
        self.file = getattr(code, "co_filename", "?")
        self.globals = getattr(fn, "__globals__", {})
        self.closure = {}
        cells = getattr(fn, "__closure__", None) or ()
        for var, cell in zip(code.co_freevars if code else (), cells):
            try:
                self.closure[var] = cell.cell_contents
            except ValueError:   # empty cell: not bound yet
                pass
        self.written, self.sites, self.ret_o, self.ret_e = set(), set(), set(), set()
        self.loops: list = []    # per enclosing loop: (envs at break, envs at continue)
        self.params: tuple = ()
        self.locals: set = set()

    def run(self) -> _Summary:
        try:
            tree = ast.parse(self.src)
            fdef = tree.body[0] if tree.body else None
            if not isinstance(fdef, ast.FunctionDef):
                raise _GiveUp("source is not a plain function definition")
            self._block(fdef.body, self._enter(fdef))
            return _Summary(self.params, frozenset(self.written), frozenset(self.sites),
                            frozenset(self.ret_o), frozenset(self.ret_e), True, "")
        except _GiveUp as g:
            where = ""
            if getattr(g.node, "lineno", None) is not None:
                where = f" (at {self.file}:{self.first_line + g.node.lineno - 1})"
            reason = f"kernel `{self.name}`: {g.msg}{where}"
        except Exception as e:   # a bug here must not turn into a missed write
            reason = f"kernel `{self.name}`: analysis failed ({type(e).__name__}: {e})"
        return _Summary(self.params or _param_names(self.fn), _E, _E, _E, _E, False, reason)

    def _enter(self, fdef: ast.FunctionDef) -> dict:
        a = fdef.args
        if a.vararg or a.kwarg:
            raise _GiveUp("*args / **kwargs parameters", fdef)
        params = a.posonlyargs + a.args + a.kwonlyargs
        self.params = tuple(p.arg for p in params)
        env = {}
        for p in params:
            # A constexpr is never a pointer; any other parameter may be one, or a tuple of them.
            if p.annotation is not None and "constexpr" in ast.unparse(p.annotation):
                env[p.arg] = _DATA
            else:
                env[p.arg] = _Val(frozenset((p.arg,)), frozenset((p.arg + "[]",)))
        self.locals = {n.id for n in ast.walk(fdef)
                       if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        return env

    # statements: each takes the environment in and returns it out (None: unreachable) -----------

    def _block(self, stmts, env):
        for s in stmts:
            if env is None:
                return None
            env = self._stmt(s, env)
        return env

    def _stmt(self, s, env):
        t = type(s)
        if t is ast.Expr or t is ast.Assert or t is ast.Raise:
            self._eval_children(s, env)
            return None if t is ast.Raise else env
        if t is ast.Assign:
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
                raise _GiveUp("value stored into an attribute or container", s)
            old = self._name(s.target.id, env, s.target)
            env[s.target.id] = self._binop(s.op, old, self._eval(s.value, env))
        elif t is ast.If:
            self._eval(s.test, env)
            return _join_envs([self._block(s.body, dict(env)), self._block(s.orelse, dict(env))])
        elif t is ast.For:
            it = self._eval(s.iter, env)   # evaluated once, before the loop
            item = _Val(it.full, it.full)

            def enter(e):                  # the target is bound on each iteration
                self._bind(s.target, item, e)
                return e
            return self._loop(env, s, enter)
        elif t is ast.While:
            def enter(e):                  # the test runs before each iteration and at exit
                self._eval(s.test, e)
                return e
            return self._loop(env, s, enter)
        elif t is ast.Break or t is ast.Continue:
            if not self.loops:
                raise _GiveUp("break/continue outside a loop", s)
            self.loops[-1][t is ast.Continue].append(env)
            return None
        elif t is ast.Return:
            if s.value is not None:
                v = self._eval(s.value, env)
                self.ret_o |= v.origins
                self.ret_e |= v.elems
            return None
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
        elif t is not ast.Pass:
            raise _GiveUp(f"unsupported statement `{t.__name__}`", s)
        return env

    def _loop(self, env, s, enter):
        # Run the body to a fixpoint: values only grow and token sets are finite.
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
        done = self._block(s.orelse, enter(dict(head)))   # normal exit runs the else clause
        return _join_envs([done, *breaks])

    def _assign(self, target, value, env):
        # `a, b = x, y` binds pairwise (after evaluating all of the right side); anything else
        # binds every name to the whole value.
        pair = (ast.Tuple, ast.List)
        if (isinstance(target, pair) and isinstance(value, pair)
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

    # expressions ------------------------------------------------------------------------------

    def _name(self, name, env, node) -> _Val:
        v = env.get(name)
        if v is not None:
            return v
        if name in self.closure:
            g = _static(self.closure[name])
        elif name in self.globals:
            g = _static(self.globals[name])
        elif hasattr(builtins, name):
            g = _static(getattr(builtins, name))
        elif name in self.locals:   # not assigned yet on this path (first pass over a loop)
            return _DATA
        else:
            raise _GiveUp(f"name `{name}` cannot be resolved", node)
        return g

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
        if t is ast.UnaryOp:   # -, ~ and `not` reject pointers
            v = self._eval(n.operand, env)
            return v if isinstance(n.op, ast.UAdd) else _DATA
        if t is ast.BoolOp:    # `a or b` is one of its operands
            return _union([self._eval(x, env) for x in n.values])
        if t in _DATA_EXPRS:   # comparisons, slices, f-strings: never pointers
            self._eval_children(n, env)
            return _DATA
        if t is ast.IfExp:
            self._eval(n.test, env)
            return _join(self._eval(n.body, env), self._eval(n.orelse, env))
        if t is ast.Tuple or t is ast.List:
            u = _union([self._eval(e.value if isinstance(e, ast.Starred) else e, env)
                        for e in n.elts])
            return _Val(u.origins, u.full)
        if t is ast.Subscript:
            v = self._eval(n.value, env)
            self._eval(n.slice, env)
            return _Val(v.full, v.full)
        if t is ast.NamedExpr:
            v = self._eval(n.value, env)
            env[n.target.id] = v
            return v
        raise _GiveUp(f"unsupported expression `{t.__name__}`", n)

    def _eval_children(self, node, env):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._eval(child, env)

    @staticmethod
    def _binop(op, a: _Val, b: _Val) -> _Val:
        if isinstance(op, ast.Add):     # ptr + int, int + ptr, tuple + tuple
            return _Val(a.origins | b.origins, a.elems | b.elems)
        if isinstance(op, ast.Sub):     # only ptr - int keeps a pointer
            return _Val(a.origins, a.elems)
        if isinstance(op, ast.Mult):    # never a pointer, but tuple * constexpr repeats a tuple
            return _Val(_E, a.full | b.full)
        return _DATA                    # Triton rejects pointers in every other operator

    def _attr(self, v: _Val, attr: str, node) -> _Val:
        obj = v.obj
        if obj is _NO_OBJ:
            if attr in _DATA_ATTRS:
                return _DATA
            if attr == "T":
                return _Val(v.origins, v.elems)
            if v.full:
                raise _GiveUp(f"attribute `.{attr}` of a value that may hold a pointer", node)
            return _DATA
        if isinstance(obj, types.ModuleType):
            if not hasattr(obj, attr):
                raise _GiveUp(f"`{obj.__name__}.{attr}` does not exist", node)
            val = getattr(obj, attr)
            if (_is_tl_module(obj.__name__) and callable(val)
                    and not isinstance(val, types.ModuleType)):
                return _static(_TLRef(obj.__name__, attr))
            return _static(val)
        if isinstance(obj, _TLRef):
            raise _GiveUp(f"attribute `.{attr}` of `{obj.name}`", node)
        try:
            return _static(getattr(obj, attr))
        except Exception:
            return _DATA

    # calls ------------------------------------------------------------------------------------

    def _call(self, n: ast.Call, env) -> _Val:
        if (any(isinstance(a, ast.Starred) for a in n.args)
                or any(k.arg is None for k in n.keywords)):
            raise _GiveUp("call with *args or **kwargs", n)
        args = [self._eval(a, env) for a in n.args]
        kwargs = {k.arg: self._eval(k.value, env) for k in n.keywords}
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
        _, jit_kinds, cexpr_kinds = _triton()
        if not isinstance(obj, _TLRef):   # `from triton.language import store` and the like
            inner = obj.fn if isinstance(obj, jit_kinds) else obj
            mod = getattr(inner, "__module__", None)
            if isinstance(mod, str) and _is_tl_module(mod) and hasattr(inner, "__name__"):
                obj = _TLRef(mod, inner.__name__)
        if isinstance(obj, _TLRef):
            return self._tl_call(obj, args, kwargs, n)
        if isinstance(obj, jit_kinds):
            return self._jit_call(obj, args, kwargs, n)
        if cexpr_kinds and isinstance(obj, cexpr_kinds):
            return _DATA   # runs on constexprs at compile time
        if _is(obj, _BUILTIN_NEVER):
            raise _GiveUp(f"call of `{obj.__name__}`", n)
        allv = [*args, *kwargs.values()]
        self._check_callables(allv, n)
        if _is(obj, _BUILTIN_PURE):
            return _DATA
        if _is(obj, _BUILTIN_PROP):
            return _union(allv)
        if any(v.full for v in allv):
            what = getattr(obj, "__name__", type(obj).__name__)
            raise _GiveUp(f"call of non-Triton function `{what}` with a value that may hold a "
                          "pointer", n)
        return _DATA   # host Python on constexprs cannot produce a device address

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
            return _union(allv)   # elementwise math
        if name in _PTR_WRITES:
            self._write(arg(0, "pointer"), name, n)
            return _DATA
        if name == "store_tensor_descriptor":
            self._write(arg(0, "desc"), name, n)
            return _DATA
        if name == "load" or name == "load_tensor_descriptor":
            return self._loaded(arg(0, "pointer" if name == "load" else "desc"))
        if name in _BASE_FIRST:
            return _Val(arg(0, "base").origins)
        if name == "where":
            return _union([arg(1, "x"), arg(2, "y")])
        if name == "cast":
            return _Val(arg(0, "input").origins | self._cast_to(arg(1, "dtype")))
        if name == "full" or name == "zeros":
            return _Val(self._cast_to(arg(2 if name == "full" else 1, "dtype")))
        if name == "zeros_like":   # null pointers when given pointers: unattributable
            return _Val(_UNKS if arg(0, "input").origins else _E)
        if name == "pointer_type":
            return _Val(_UNKS)
        self._check_callables(allv, n)
        if name in _PURE or ref.module == "triton.language.random":
            return _DATA
        if name in _PROP:
            return _union(allv)
        target = getattr(sys.modules.get(ref.module), name, None)
        if isinstance(target, _triton()[1]):   # a standard-library @jit helper: read it too
            return self._jit_call(target, args, kwargs, n)
        if any(v.full for v in allv):
            raise _GiveUp(f"`{ref.module}.{name}`, unknown to the analysis, gets a value that "
                          "may hold a pointer", n)
        return _DATA

    def _method(self, name, recv: _Val, args, kwargs, n) -> _Val:
        allv = [*args, *kwargs.values()]
        if name in _METHOD_WRITES:
            self._write(recv, f".{name}", n)
            return _DATA
        if name == "load":   # tensor descriptor
            return self._loaded(recv)
        if name == "to" or name == "cast":
            dt = args[0] if args else kwargs.get("dtype")
            return _Val(recv.origins | (_UNKS if dt is None else self._cast_to(dt)))
        if name in _METHOD_PROP:
            self._check_callables(allv, n)
            return _union([recv, *allv])
        if recv.full or any(v.full for v in allv):
            raise _GiveUp(f"unknown method `.{name}` on a value that may hold a pointer", n)
        return _DATA

    def _jit_call(self, jit, args, kwargs, n) -> _Val:
        fname = jit.fn.__name__
        if jit.fn in self.stack:
            raise _GiveUp(f"recursive call of `{fname}`", n)
        s = _summarize(jit, self.stack)
        if not s.certain:
            raise _GiveUp(f"calls `{fname}`, which cannot be analyzed: {s.reason}", n)
        if len(args) > len(s.params) or any(k not in s.params for k in kwargs):
            raise _GiveUp(f"call of `{fname}` does not match its parameters", n)
        bound = dict(zip(s.params, args))
        bound.update(kwargs)
        for site in s.sites:
            self._write(_Val(self._map(site, bound)),
                        f"`{fname}` (through its {', '.join(sorted(site))})", n)
        return _Val(self._map(s.ret_o, bound), self._map(s.ret_e, bound))

    @staticmethod
    def _map(tokens, bound) -> frozenset:
        """A callee's tokens in the caller's terms: `p` is the argument, `p[]` its elements."""
        out = set()
        for t in tokens:
            if t == _UNK:
                out.add(t)
            elif t.endswith("[]"):
                if t[:-2] in bound:
                    out |= bound[t[:-2]].full
            elif t in bound:
                out |= bound[t].origins
        return frozenset(out)

    # helpers ----------------------------------------------------------------------------------

    def _write(self, ptr: _Val, what: str, node):
        o = ptr.origins
        if _UNK in o:
            raise _GiveUp(f"{what} writes through a pointer made by a cast", node)
        if not o:
            raise _GiveUp(f"{what} writes through a value not traced to any parameter", node)
        self.written.update(t[:-2] if t.endswith("[]") else t for t in o)
        self.sites.add(o)

    @staticmethod
    def _loaded(ptr: _Val) -> _Val:
        # Loads yield data, never a parameter's address; only an already unattributable
        # pointer can point at pointers.
        return _Val(_UNKS if _UNK in ptr.origins else _E)

    @staticmethod
    def _cast_to(dt: _Val) -> frozenset:
        """A cast to a dtype not known to be a non-pointer type may forge an address."""
        tl = _triton()[0]
        if isinstance(dt.obj, tl.dtype) and not dt.obj.scalar.is_ptr():
            return _E
        return _UNKS

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
                    raise _GiveUp(f"`{obj.fn.__name__}`, passed as a function argument, may "
                                  "write memory", n)
