#!/usr/bin/env python3
"""check_standalone.py ROOT - the user-facing files of the repository must stand alone.

Role: fails when a file users read points at documents outside the repository (the team's design
notes, which users do not have). In: ROOT, a source tree. Out: one line per line that refers to
them, `PATH:LINE: names NAME[, NAME...], outside the repository; state what it says instead`,
then `standalone: F files checked, N references`; exit 0 when N = 0, 1 otherwise, 2 for usage
errors.
Must not: read anything outside ROOT, or scan tests/, bench/ or build trees (test literals and
recorded logs are not user documentation).

Scanned: README.md, docs/, scenarios/, include/, examples/, python/ (but not python/tests/) and
engine/scenario/default_scenario.yaml (the built-in scenario that `qmesh topo dump` prints).
Standard library only.
"""
import os
import sys

NAMES = ('../shared', 'shared/docs', 'HARDWARE.md', 'DESIGN.md', 'SCENARIOS.md', 'CONFORMANCE.md')
FILES = ('README.md', 'engine/scenario/default_scenario.yaml')
DIRS = ('docs', 'scenarios', 'include', 'examples', 'python')
SKIP_DIRS = ('python/tests',)


def scanned(root):
    """Relative paths of the files to check, sorted."""
    out = [f for f in FILES if os.path.isfile(os.path.join(root, f))]
    for d in DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, d)):
            rel = os.path.relpath(dirpath, root).replace(os.sep, '/')
            dirnames[:] = [n for n in dirnames
                           if rel + '/' + n not in SKIP_DIRS and not n.startswith('.')
                           and n != '__pycache__']
            out += [rel + '/' + f for f in filenames]
    return sorted(out)


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print('usage: check_standalone.py ROOT (a source tree)', file=sys.stderr)
        return 2
    root = argv[1]
    files = scanned(root)
    hits = 0
    for rel in files:
        with open(os.path.join(root, rel), 'rb') as f:
            text = f.read().decode('utf-8', errors='replace')
        for no, line in enumerate(text.splitlines(), 1):
            found = [name for name in NAMES if name in line]
            if found:
                hits += 1
                print('%s:%d: names %s, outside the repository; state what it says instead'
                      % (rel, no, ', '.join(found)))
    print('standalone: %d files checked, %d references' % (len(files), hits))
    return 1 if hits else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
