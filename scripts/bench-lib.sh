# Shared by scripts/bench*.sh (sourced, not run). CONTRACT §9: every figure ends as one line
# `ratio NAME VALUE GOAL`, and BENCH_ONLY=NAME[,NAME] runs only those figures.
#
# Databases: with TENDER_DATABASE_URL set, the benchmarks use that database and never start, stop or
# prune the cluster behind it, nor drop a database they did not create (pgbench's tables go into the
# same database). Without it, the local cluster under $TENDER_DATA_DIR/pg is started for the run.

# bench_wants NAME...: true when BENCH_ONLY is unset or names one of them.
bench_wants() {
  [ -z "${BENCH_ONLY:-}" ] && return 0
  local name
  for name in "$@"; do
    [[ ",${BENCH_ONLY// /}," == *",$name,"* ]] && return 0
  done
  return 1
}

# bench_ratio NAME VALUE GOAL: the summary line (plain numbers; VALUE "nan" when it could not be measured).
bench_ratio() {
  printf 'ratio %s %s %s\n' "$1" "${2:-nan}" "$3"
}

# bench_divide A B [DIGITS]: A/B as a plain number, "nan" when either is missing or B is zero.
bench_divide() {
  python3 -c 'import sys
a, b, d = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    print(f"{float(a) / float(b):.{d}f}")
except (ValueError, ZeroDivisionError):
    print("nan")' "${1:-}" "${2:-}" "${3:-2}"
}

# bench_database NAME: makes sure TENDER_DATABASE_URL names a database. When unset, starts the local
# cluster, makes a fresh NAME in it and sets BENCH_STARTED_PG=1 if this call started the cluster.
bench_database() {
  BENCH_STARTED_PG="${BENCH_STARTED_PG:-0}"
  if [ -n "${TENDER_DATABASE_URL:-}" ]; then return 0; fi
  scripts/pg.sh status 2>/dev/null | grep -q running || BENCH_STARTED_PG=1
  scripts/pg.sh start >/dev/null
  scripts/pg.sh createdb "$1" --fresh >/dev/null
  TENDER_DATABASE_URL="$(scripts/pg.sh url "$1")"
  export TENDER_DATABASE_URL BENCH_STARTED_PG
}

# bench_sibling_url NAME: the URL of database NAME on the server of TENDER_DATABASE_URL (query kept).
bench_sibling_url() {
  python3 -c 'import sys, urllib.parse as u
p = u.urlsplit(sys.argv[1])
print(u.urlunsplit((p.scheme, p.netloc, "/" + sys.argv[2], p.query, p.fragment)))' "$TENDER_DATABASE_URL" "$1"
}

# bench_database_name: the database name of TENDER_DATABASE_URL.
bench_database_name() {
  python3 -c 'import sys, urllib.parse as u; print(u.urlsplit(sys.argv[1]).path.lstrip("/"))' "$TENDER_DATABASE_URL"
}

# bench_pgbench_init: pgbench's tables (scale 10) in TENDER_DATABASE_URL's database, once per database.
bench_pgbench_init() {
  local scale
  scale=$(psql -X -At "$TENDER_DATABASE_URL" -c "SELECT count(*) FROM pgbench_branches" 2>/dev/null || true)
  [ "$scale" = 10 ] && return 0
  pgbench -q -i -s 10 "$TENDER_DATABASE_URL" >/dev/null 2>&1
}

# bench_checkpoint: a CHECKPOINT before a timed write run, so that no side of a ratio pays for the dirty
# pages or the full-page writes the part before it left (pgbench -i alone writes ~150 MB). Needs a
# superuser or pg_checkpoint; without either the run goes on unchanged.
bench_checkpoint() {
  psql -X -q "$TENDER_DATABASE_URL" -c CHECKPOINT >/dev/null 2>&1 || true
}

# bench_pgbench_tpcb CLIENTS SECONDS: pgbench's default TPC-B-like tps (the write limit of this machine).
bench_pgbench_tpcb() {
  bench_pgbench_init
  bench_checkpoint
  pgbench -c "$1" -j 2 -T "$2" "$TENDER_DATABASE_URL" 2>/dev/null | awk '/^tps/ {print $3; exit}'
}

# bench_pgbench_select CLIENTS SECONDS: pgbench -S tps (the read limit).
bench_pgbench_select() {
  bench_pgbench_init
  pgbench -S -c "$1" -j 2 -T "$2" "$TENDER_DATABASE_URL" 2>/dev/null | awk '/^tps/ {print $3; exit}'
}
