"""patch_util.py - what the experiment patches of bench/device_runN.sh share: apply
exact (old, new) text replacements to a file of the patched copy, each `old`
present exactly once."""


def patch(path, pairs):
    s = open(path).read()
    for old, new in pairs:
        assert s.count(old) == 1, (path, old[:70])
        s = s.replace(old, new, 1)
    open(path, "w").write(s)
