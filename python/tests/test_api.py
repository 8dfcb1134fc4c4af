# SPDX-License-Identifier: MIT
"""The package against the C headers, in one process (no launcher, no NumPy).

- every function in mscclpp._lib.SIGNATURES has a prototype in
  include/mscclpp/*.h with the same number of parameters, and ctypes types
  that match the C types parameter by parameter (a pointer for a pointer,
  c_size_t for size_t, ...), result included;
- the enums (Status, DataType, ReduceOp) have the C enums' names and values;
- the package's version is the header's and the library's;
- how a failing library and a missing library look to the caller.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import subprocess
import sys

from harness import Checks

import mscclpp
from mscclpp import _lib

checks = Checks("test_api")
TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE = os.path.join(TOP, "include", "mscclpp")


def headers():
    text = {}
    for f in sorted(os.listdir(INCLUDE)):
        if f.endswith(".h"):
            with open(os.path.join(INCLUDE, f), encoding="utf-8") as fh:
                text[f] = re.sub(r"/\*.*?\*/", " ", fh.read(), flags=re.S)
    return text


HEADERS = headers()
ALL = "\n".join(HEADERS.values())

# ---- prototypes ---------------------------------------------------------------------

PROTO = re.compile(r"MSCCLPP_API\s+([\w\s\*]+?)\s*\b(mscclpp\w+)\s*\(([^)]*)\)\s*;")
PROTOS = {m.group(2): (" ".join(m.group(1).split()), m.group(3)) for m in PROTO.finditer(ALL)}

VALUE_TYPES = {
    "int": ctypes.c_int,
    "size_t": ctypes.c_size_t,
    "mscclppResult_t": ctypes.c_int,
    "mscclppDataType_t": ctypes.c_int,
    "mscclppRedOp_t": ctypes.c_int,
    "mscclppComm_t": ctypes.c_void_p,
    "mscclppStream_t": ctypes.c_void_p,
    "mscclppUniqueId": _lib.UniqueIdStruct,
    "unsigned": ctypes.c_uint,
    "uint64_t": ctypes.c_uint64,
    "mscclppMemKind_t": ctypes.c_int,
    "mscclppTransport_t": ctypes.c_int,
    "mscclppRegisteredMemory_t": ctypes.c_void_p,
    "mscclppConnection_t": ctypes.c_void_p,
    "mscclppMemoryChannel_t": ctypes.c_void_p,
    "mscclppPortChannel_t": ctypes.c_void_p,
    "mscclppPlan_t": ctypes.c_void_p,
}
# opaque handles written through a pointer; structs the package passes as a
# pointer to its own buffer
_HANDLE_OUT = ctypes.POINTER(ctypes.c_void_p)
POINTER_TYPES = {
    "size_t": ctypes.POINTER(ctypes.c_size_t),
    "mscclppTransport_t": ctypes.POINTER(ctypes.c_int),
    "mscclppRegisteredMemory_t": _HANDLE_OUT,
    "mscclppConnection_t": _HANDLE_OUT,
    "mscclppMemoryChannel_t": _HANDLE_OUT,
    "mscclppPortChannel_t": _HANDLE_OUT,
    "mscclppMemoryChannelConfig": ctypes.c_void_p,
    "mscclppPortChannelConfig": ctypes.c_void_p,
    "mscclppMemoryChannelDeviceHandle": ctypes.c_void_p,
    "mscclppPortChannelDeviceHandle": ctypes.c_void_p,
    "void": ctypes.c_void_p,
    "char": ctypes.c_char_p,
    "int": ctypes.POINTER(ctypes.c_int),
    "mscclppResult_t": ctypes.POINTER(ctypes.c_int),
    "mscclppComm_t": ctypes.POINTER(ctypes.c_void_p),
    "mscclppUniqueId": ctypes.POINTER(_lib.UniqueIdStruct),
    "mscclppParamInfo": ctypes.POINTER(_lib.ParamInfoStruct),
    "mscclppPlan_t": _HANDLE_OUT,
    "mscclppPlanInfo": ctypes.POINTER(_lib.PlanInfoStruct),
    "uint64_t": ctypes.POINTER(ctypes.c_uint64),
}


def ctype_of(decl):
    """The ctypes type a C declaration (type, with or without a name) needs."""
    decl = " ".join(decl.replace("*", " * ").split())
    words = [w for w in decl.split() if w != "const"]
    stars = words.count("*")
    words = [w for w in words if w != "*"]
    if len(words) > 1:
        words = words[:-1]  # the parameter's name
    base = " ".join(words)
    if stars == 0:
        return VALUE_TYPES.get(base)
    if stars == 1:
        return POINTER_TYPES.get(base)
    if stars == 2 and base == "void":
        return ctypes.POINTER(ctypes.c_void_p)
    return None


def test_signatures():
    for name, (restype, argtypes) in _lib.SIGNATURES.items():
        if name not in PROTOS:
            checks.fail(f"{name}: declared in _lib.py, no prototype in include/mscclpp/")
            continue
        ret, params = PROTOS[name]
        params = [p.strip() for p in params.split(",") if p.strip() and p.strip() != "void"]
        checks.equal(len(argtypes), len(params), f"{name}: number of parameters")
        checks.equal(restype, ctype_of(ret), f"{name}: result type ({ret})")
        for k, (have, param) in enumerate(zip(argtypes, params)):
            want = ctype_of(param)
            checks.true(want is not None, f"{name}: parameter {k} ({param}) has no known ctypes type (extend test_api)")
            checks.equal(have, want, f"{name}: parameter {k} ({param})")
    # the library exports them all (declared at load time)
    lib = _lib.lib()
    for name in _lib.SIGNATURES:
        checks.true(hasattr(lib, name), f"the library exports {name}")


# ---- structs the package lays out itself ----------------------------------------------

FIELD_TYPES = {
    "size_t": ctypes.c_size_t,
    "int": ctypes.c_int,
    "uint64_t": ctypes.c_uint64,
    "const char*": ctypes.c_char_p,
}


def test_structs():
    """Each ctypes.Structure of _lib has the C struct's fields, in order, with
    matching types: a field added to the header must be added here too."""
    for typedef, ours in (("mscclppParamInfo", _lib.ParamInfoStruct), ("mscclppPlanInfo", _lib.PlanInfoStruct)):
        m = re.search(r"typedef\s+struct\s*\{([^}]*)\}\s*" + typedef + r"\s*;", ALL)
        checks.true(m is not None, f"{typedef}: no typedef struct in include/mscclpp/")
        if m is None:
            continue
        fields = []
        for decl in m.group(1).split(";"):
            decl = " ".join(decl.replace("*", "* ").split())
            if not decl:
                continue
            ctype, name = decl.rsplit(" ", 1)
            fields.append((name, FIELD_TYPES.get(ctype.replace("* ", "*").strip())))
        checks.equal([n for n, _ in ours._fields_], [n for n, _ in fields], f"{typedef}: field names")
        for (n, have), (_, want) in zip(ours._fields_, fields):
            checks.equal(have, want, f"{typedef}.{n}: type")


# ---- enums and constants --------------------------------------------------------------


def c_enum(typedef):
    m = re.search(r"typedef\s+enum\s*\{([^}]*)\}\s*" + typedef + r"\s*;", ALL)
    assert m, typedef
    out = {}
    for item in m.group(1).split(","):
        item = item.strip()
        if item:
            k, v = (s.strip() for s in item.split("="))
            out[k] = int(v)
    return out


def norm(name):
    return name.replace("_", "").lower()


def test_enums():
    for typedef, enum, count in (
        ("mscclppResult_t", mscclpp.Status, "mscclppNumResults"),
        ("mscclppDataType_t", mscclpp.DataType, "mscclppNumTypes"),
        ("mscclppRedOp_t", mscclpp.ReduceOp, "mscclppNumOps"),
    ):
        c = c_enum(typedef)
        checks.equal(len(enum), c.pop(count), f"{enum.__name__} has {count} members")
        py = {norm(m.name): m.value for m in enum}
        cn = {norm(k[len("mscclpp") :]): v for k, v in c.items()}
        checks.equal(py, cn, f"{enum.__name__} against {typedef}")
    lib = _lib.lib()
    for t in mscclpp.DataType:
        checks.equal(t.itemsize, lib.mscclppDataTypeSize(t), f"DataType.{t.name}.itemsize")
    m = re.search(r"#define MSCCLPP_UNIQUE_ID_BYTES (\d+)", ALL)
    checks.equal(mscclpp.UniqueId.SIZE, int(m.group(1)), "UniqueId.SIZE")
    checks.equal(ctypes.sizeof(_lib.UniqueIdStruct), int(m.group(1)), "sizeof(UniqueIdStruct)")
    for name in ("REVOKE_DEFAULT", "SHRINK_DEFAULT", "SHRINK_ABORT"):
        m = re.search(rf"#define MSCCLPP_{name} (\d+)", ALL)
        checks.true(m is not None and getattr(_lib, name) == int(m.group(1)), f"_lib.{name} against MSCCLPP_{name}")


def test_version():
    parts = [re.search(rf"#define MSCCLPP_{p} (\d+)", ALL).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    checks.equal(mscclpp.__version__, ".".join(parts), "mscclpp.__version__ against core.h")
    checks.equal(mscclpp.version(), mscclpp.__version__, "mscclpp.version() (the library's)")
    checks.equal(os.path.realpath(mscclpp.include_dir()), os.path.realpath(os.path.dirname(INCLUDE)), "include_dir() from a checkout")


# ---- errors ---------------------------------------------------------------------------


def test_errors():
    e = mscclpp.MscclppError(4, "bad thing", "mscclppFoo")
    checks.equal(type(mscclpp._errors.make_error(4, "x")), mscclpp.InvalidArgumentError, "class for status 4")
    checks.equal(type(mscclpp._errors.make_error(8, "x")), mscclpp.MscclppTimeoutError, "class for status 8")
    checks.equal(type(mscclpp._errors.make_error(42, "x")), mscclpp.MscclppError, "class for an unknown status")
    checks.equal(str(e), "mscclppFoo: bad thing (invalid_argument)", "str(MscclppError)")
    checks.equal(e.status, mscclpp.Status.INVALID_ARGUMENT, "status is a Status")
    # a real failure: the library's reason and status, read on this thread
    e = checks.raises(mscclpp.InvalidArgumentError, mscclpp.Communicator, 2, 0, b"\x01" * 128, contains="unique id")
    if e is not None:
        checks.equal(e.function, "mscclppCommInitRankFromId", "the function that failed")
    checks.equal(_lib.error_string(mscclpp.Status.TIMEOUT) != "", True, "mscclppGetErrorString")


def run_python(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=60)


def test_loading():
    # MSCCLPP_LIBRARY that does not exist: import works, the first call says
    # which path failed
    p = run_python(
        "import mscclpp\ntry:\n mscclpp.version()\nexcept mscclpp.LibraryNotFoundError as e:\n print('ERR', e)",
        MSCCLPP_LIBRARY="/nonexistent/libmscclpp.so",
    )
    checks.true(p.returncode == 0 and "ERR cannot load MSCCLPP_LIBRARY=/nonexistent/libmscclpp.so" in p.stdout, f"a missing MSCCLPP_LIBRARY: {p.stdout!r} {p.stderr!r}")
    # a library that is not libmscclpp
    libc = ctypes.util.find_library("c")
    if libc:
        p = run_python(
            "import mscclpp\ntry:\n mscclpp.version()\nexcept OSError as e:\n print('ERR', e)",
            MSCCLPP_LIBRARY=libc,
        )
        checks.true("has no mscclppGetErrorString" in p.stdout, f"MSCCLPP_LIBRARY=libc: {p.stdout!r} {p.stderr!r}")


test_signatures()
test_structs()
test_enums()
test_version()
test_errors()
test_loading()
checks.done()
