"""setup.py -- builds the qmesh package with the repository's CMake build (docs/python.md).

`pip install --no-build-isolation ./python` (from the repository root) configures the parent
folder with CMake into the build_ext temporary folder -- the interpreter running pip as
Python3_EXECUTABLE, tests off, MPI off (the package is one process), CUDA when nvcc is found --
builds the target qmesh_python (the extension linked with the static libqmesh) and puts it next to
qmesh/__init__.py. QMESH_CMAKE_ARGS adds configure arguments (e.g. "-DQM_WITH_CUDA=OFF").
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def version():
    text = open(os.path.join(ROOT, "include", "qmesh.h")).read()
    parts = [re.search(r"#define QM_VERSION_%s (\d+)" % k, text).group(1)
             for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


class CMakeBuild(build_ext):
    """Builds each extension (there is one: qmesh._qmesh) through CMake."""

    def build_extension(self, ext):
        tmp = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        os.makedirs(tmp, exist_ok=True)
        cfg = ["cmake", "-S", ROOT, "-B", tmp, "-DCMAKE_BUILD_TYPE=Release",
               "-DQM_BUILD_TESTS=OFF", "-DQM_WITH_MPI=OFF", "-DQM_WITH_PYTHON=ON",
               "-DPython3_EXECUTABLE=" + sys.executable]
        if not os.environ.get("CMAKE_CUDA_COMPILER") and os.path.exists("/usr/local/cuda/bin/nvcc") \
                and not shutil.which("nvcc"):
            cfg.append("-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc")
        cfg += shlex.split(os.environ.get("QMESH_CMAKE_ARGS", ""))
        subprocess.check_call(cfg)
        subprocess.check_call(["cmake", "--build", tmp, "--target", "qmesh_python", "-j",
                               str(os.cpu_count() or 2)])
        name = os.path.basename(self.get_ext_filename(ext.name))
        dst = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(os.path.join(tmp, "python", "qmesh", name), dst)


setup(
    name="qmesh",
    version=version(),
    description="Classical data into quantum state vectors sharded across a mesh of GPUs",
    packages=["qmesh"],
    ext_modules=[Extension("qmesh._qmesh", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.8",
    zip_safe=False,
)
