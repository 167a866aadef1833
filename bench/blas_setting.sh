# Sourced by the bench scripts: with_blas SETTING COMMAND... runs COMMAND
# under an OpenBLAS setting: "set" (the environment's as it is), "unset"
# (OpenBLAS picks its kernels by the CPU) or a core type (SkylakeX, ...).
with_blas() {
  local b=$1
  shift
  case $b in
    set) "$@" ;;
    unset) env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$@" ;;
    *) env -u OPENBLAS_L2_SIZE OPENBLAS_CORETYPE="$b" "$@" ;;
  esac
}
