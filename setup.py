"""Package discovery for the repository layout.

`backends/` and `kernels/` sit at the top level of the repository (one folder per concern) but
install as `unigraph.backends` and `unigraph.kernels`, so that nothing generic like `kernels`
lands in anyone's site-packages. Editable installs honour the same mapping.
"""
from setuptools import find_packages, setup

MAPPED_DIRS = {"unigraph": "unigraph", "unigraph.backends": "backends", "unigraph.kernels": "kernels"}

packages = []
for package, folder in MAPPED_DIRS.items():
    packages.append(package)
    packages += [f"{package}.{sub}" for sub in find_packages(where=folder)]

# the CPU cost model's committed constants (backends/cost_constants_cpu.json) ship with the package
setup(packages=packages, package_dir=MAPPED_DIRS, package_data={"unigraph.backends": ["*.json"]})
