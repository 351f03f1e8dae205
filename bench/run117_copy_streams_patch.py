"""run117_copy_streams_patch.py - the experiment patch of bench/device_run117.sh, applied to a
copy of the tree (argv[1]); not part of the library. XP_COPY_STREAMS 4 -> 8: at 4 ranks the
PEER transport's pushes (copy streams 2..4) and GEMM+AllReduce's pulls (counted from the other
end) then use six different streams; with 4 copy streams the pushes at distance 2 and 3 share
streams with the pulls at distance 3 and 2."""
import sys

sys.path.insert(0, sys.argv[0].rsplit("/", 1)[0])
from patch_util import patch

patch(sys.argv[1] + "/src/cuda/transport.h", [
    ("#define XP_COPY_STREAMS 4 ", "#define XP_COPY_STREAMS 8 "),
])
