#!/bin/bash
# Shared by strong-scaling.sh and weak-scaling.sh: maps a rank count onto (dp, tp, pp) along one
# axis and adds the task when the model allows it. Sourced after study_lib.sh.
# shellcheck disable=SC2154 # axis, fixed_* and study_* come from the driver and study_lib.sh
# shellcheck disable=SC2034 # study_extra_used, axis and fixed_* are read by study_lib.sh and the driver

# The mesh options both scaling drivers take; call from study_parse_extra. Sets
# study_extra_used to the words consumed (0 when the option is not one of these).
axis=${axis:-tp}
fixed_dp=1 fixed_tp=1 fixed_pp=1
scaling_parse_option() {
  study_extra_used=0
  case $1 in
    --axis) axis=${2:?}; study_extra_used=2 ;;
    --dp) fixed_dp=${2:?}; study_extra_used=2 ;;
    --tp) fixed_tp=${2:?}; study_extra_used=2 ;;
    --pp) fixed_pp=${2:?}; study_extra_used=2 ;;
  esac
}

scaling_add() { # ranks batch [extra set...]
  local r=$1 batch=$2
  shift 2
  local others=$((fixed_dp * fixed_tp * fixed_pp))
  case $axis in
    dp) others=$((fixed_tp * fixed_pp)) ;;
    tp) others=$((fixed_dp * fixed_pp)) ;;
    pp) others=$((fixed_dp * fixed_tp)) ;;
  esac
  if ((r % others != 0)); then
    echo "skip $r ranks: not a multiple of $others" >&2; return 0
  fi
  local dp=$fixed_dp tp=$fixed_tp pp=$fixed_pp
  case $axis in
    dp) dp=$((r / others)) ;;
    tp) tp=$((r / others)) ;;
    pp) pp=$((r / others)) ;;
  esac
  if ((study_heads % tp != 0)); then
    echo "skip $r ranks: tp=$tp does not divide heads=$study_heads" >&2; return 0
  fi
  if ((pp > study_layers)); then
    echo "skip $r ranks: pp=$pp > layers=$study_layers" >&2; return 0
  fi
  if ((dp > batch)); then
    echo "skip $r ranks: dp=$dp > batch=$batch" >&2; return 0
  fi
  study_add "$r" "$dp" "$tp" "$pp" - "$batch" "$@"
}
