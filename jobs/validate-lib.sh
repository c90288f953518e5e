# What jobs/validate-plan.sh and jobs/validate-goodput.sh share (sourced, not run): the output
# folder, the MPI settings of the runs and the run of jobs/validate-plan.yaml at one strategy.
# validate_init NAME OUTDIR [JOB]: refuses an OUTDIR that is not empty, makes it and keeps the
# job (JOB, default jobs/validate-plan.yaml) there. A rank waiting in a collective yields its core (mpi_yield_when_idle) to a rank that
# computes, as the planner's time-sharing assumes, instead of spinning through its time slice.
validate_init() {
    VALIDATE_NAME=$1 out=$2
    local job=${3:-jobs/validate-plan.yaml}
    if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
        echo "$VALIDATE_NAME: $out is not empty; name a new folder" >&2
        exit 2
    fi
    mkdir -p "$out"
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
    export OMPI_MCA_mpi_yield_when_idle=1
    cp "$job" "$out/job.yaml" # the job, kept beside its runs
    runs=()
}
# validate_run NAME NP ARG...: `tripar run` of the kept job on NP ranks bound round-robin to the
# cores (docs/planner.md "Shared nodes") with the ARGs (--set ...), to $out/NAME.h5; appends
# it to runs.
validate_run() {
    local name=$1 np=$2
    shift 2
    mpirun -n "$np" --oversubscribe --map-by core --bind-to core:overload-allowed "$TRIPAR" run \
        "$out/job.yaml" "$@" --out "$out/$name.h5" > "$out/$name.log" 2>&1 ||
        { cat "$out/$name.log"; exit 1; }
    runs+=("$out/$name.h5")
    echo "$VALIDATE_NAME: ran $name" >&2
}
# strategy NAME NP KEY=VALUE...: validate_run of the job with --set parallel.KEY=VALUE each.
strategy() {
    local name=$1 np=$2
    shift 2
    local sets=()
    for kv in "$@"; do sets+=(--set "parallel.$kv"); done
    validate_run "$name" "$np" "${sets[@]}"
}
