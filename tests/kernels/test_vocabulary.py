"""The ids Python and the C ABI share (kernels/vocabulary.py): written once, the C enums generated
from it by the kernel build, and every Python table reading it.  CPU only; the generated header is
compiled with the host C++ compiler where there is one."""

import re
import shutil
import subprocess

import pytest
import torch

from inductor_swiglu.dispatch import plans
from inductor_swiglu.kernels import activations, build, vocabulary
from inductor_swiglu.kernels import library as kl
from inductor_swiglu.ops import cuda_impl


def test_the_python_tables_are_the_vocabulary():
    assert plans.DTYPE_IDS is vocabulary.DTYPE_IDS and kl.ISW_DTYPES is vocabulary.DTYPE_IDS
    assert plans.ACTIVATION_IDS is vocabulary.ACTIVATION_IDS and activations.IDS is vocabulary.ACTIVATION_IDS
    assert cuda_impl.ISW_DTYPES == {torch.bfloat16: 0, torch.float16: 1, torch.float32: 2}
    assert kl.ISW_FP8_E4M3 == 3
    assert activations.NAMES == (activations.SILU, activations.GELU_TANH, activations.GELU)
    assert {n: 1 << i for n, i in vocabulary.DTYPE_IDS.items() if n in build.DTYPE_BITS} == build.DTYPE_BITS


def test_no_source_writes_the_enums_again():
    # the enums live only in the generated header (not committed: written into the build)
    sources = [p for p in build.CSRC.rglob("*") if p.suffix in (".h", ".hpp", ".cu", ".cpp", ".cuh")]
    assert not [p for p in sources if p.name == vocabulary.HEADER]
    for p in sources:
        text = p.read_text(errors="replace")
        assert not re.search(r"enum\s+isw_(dtype|activation)\s*\{", text), p
        assert not re.search(r"\bISW_(ACT_\w+|BF16|FP16|FP32|FP8_E4M3)\s*=", text), p
    # and every enumerator the sources use is one it defines (ISW_ACT_ANY, -1, is the epilogues' mark
    # of a kernel that takes the activation at run time, not an id)
    used = {m for p in sources for m in re.findall(r"\bISW_(?:ACT_\w+|BF16|FP16|FP32|FP8\w*)\b", p.read_text(errors="replace"))}
    used.discard("ISW_ACT_ANY")
    defined = {t.enumerator for t in (*vocabulary.DTYPES, *vocabulary.ACTIVATIONS)}
    assert used and used <= defined, used - defined


def test_the_generated_header_is_written_with_the_configuration_lists(tmp_path):
    written = build.generate(build.select("shipped"), tmp_path)
    assert tmp_path / vocabulary.HEADER in written
    assert (tmp_path / vocabulary.HEADER).read_text() == vocabulary.header()
    assert build.GEN_DIR / vocabulary.HEADER in build.headers()   # in every unit's cache key


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs a host C++ compiler")
def test_the_generated_header_compiles_to_the_python_ids(tmp_path):
    build.generate_vocabulary(tmp_path)
    names = ", ".join(t.enumerator for t in vocabulary.DTYPES)
    (tmp_path / "main.cpp").write_text(
        '#include <cstdio>\n#include <initializer_list>\n#include "api/swiglu_api.h"\n'
        '#define PRINT(text, id) std::printf("%s %d\\n", text, int(id));\n'
        "int main() {\n  ISW_ACTIVATIONS(PRINT)\n"
        f"  for (int id : {{{names}}}) std::printf(\"%d\\n\", id);\n"
        '  std::printf("%s\\n", ISW_ACTIVATION_CHOICES);\n}\n')
    exe = tmp_path / "main"
    res = subprocess.run(["g++", "-std=c++17", f"-I{build.CSRC}", f"-I{tmp_path}", str(tmp_path / "main.cpp"), "-o", str(exe)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    n = len(vocabulary.ACTIVATIONS)
    assert dict(line.split() for line in lines[:n]) == {k: str(v) for k, v in vocabulary.ACTIVATION_IDS.items()}
    assert [int(x) for x in lines[n:-1]] == list(range(len(vocabulary.DTYPES)))
    # the C++ op's message for an unknown activation keeps its wording
    assert lines[-1] == "'silu', 'gelu_tanh' or 'gelu'"
