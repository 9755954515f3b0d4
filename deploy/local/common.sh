# Shared helpers for the local PostgreSQL and Kafka scripts. Sourced, not run.
# State lives in $STATECAST_RUN (default: <repo>/.run), one cluster per checkout.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RUN=${STATECAST_RUN:-$REPO/.run}
CACHE=${STATECAST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/statecast}
mkdir -p "$RUN" "$CACHE"

log() { echo "[$(basename "$0")] $*" >&2; }
die() { log "error: $*"; exit 1; }

# free_port prints a TCP port on 127.0.0.1 that nothing listens on, below the kernel's
# ephemeral range: no outgoing connection takes such a port as its local one, so a server
# that stops and starts again finds its port free (a port the kernel handed out would be
# anyone's in between).
free_port() {
  python3 -c '
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(500):
    p = random.randint(10000, lo - 1) if lo > 11000 else 0
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        print(s.getsockname()[1])
        break
    except OSError:
        pass
    finally:
        s.close()
'
}

# port_open HOST PORT succeeds when something accepts connections there.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# pid_alive FILE succeeds when FILE holds the pid of a running process.
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
