# A fresh repository holding fla-core's L2-norm kernel file as installed, unedited.
set -e
mkdir -p l2norm_kernel && touch l2norm_kernel/__init__.py
cp "$(python -c 'import importlib.util as u; print(u.find_spec("fla").submodule_search_locations[0])')/modules/norm/l2norm.py" l2norm_kernel/
git init -q && git add -A && git commit -qm "fla-core L2 norm"
