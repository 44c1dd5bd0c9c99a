# SPDX-License-Identifier: Apache-2.0
# bash completion for spur: sub-commands, their actions and flags, files where a flag takes one.
_spur_files() {
  compopt -o filenames 2>/dev/null  # directories get their "/", names with spaces stay whole
  COMPREPLY=($(compgen -f -- "$1"))
}

# The words of $1 that complete $cur.
_spur_offer() {
  COMPREPLY=($(compgen -W "$1" -- "$cur"))
}

# A sub-command with actions: its action first (before one is given), flags for a "-" word, and after the action
# files when $3 is "files", else the flags again.
_spur_action_or() {
  if [[ "$cur" == -* ]]; then
    _spur_offer "$2"
  elif [ -z "$action" ]; then
    _spur_offer "$1"
  elif [ "${3:-}" = files ]; then
    _spur_files "$cur"
  else
    _spur_offer "$2"
  fi
}

_spur() {
  local cur prev command action word i
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  command="${COMP_WORDS[1]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "config launch test runs sagemaker env shard-plan --version --help" -- "$cur"))
    return
  fi
  case "$prev" in
    --config_file|--hostfile|--ssh_config|--remote_spur|--history|--output) _spur_files "$cur"; return ;;
    --mixed_precision) COMPREPLY=($(compgen -W "no fp16 bf16" -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "csv json" -- "$cur")); return ;;
    --even_batches) COMPREPLY=($(compgen -W "true false" -- "$cur")); return ;;
  esac
  # The sub-command's action: its first word that is neither a flag nor a flag's value.
  action=""
  for ((i = 2; i < COMP_CWORD; i++)); do
    word="${COMP_WORDS[i]}"
    case "$word" in
      --history|--config_file|--region|--profile|--aws_endpoint_url|--poll_interval) ((i++)) ;;
      -*) ;;
      *) action="$word"; break ;;
    esac
  done
  local launch_flags="--config_file --num_processes --num_machines --machine_rank --main_process_ip
    --main_process_port --mixed_precision --cpu --gpu_ids --gradient_accumulation_steps
    --num_cpu_threads_per_process --env --dry_run --grace_period --interactive --run_name --hosts --hostfile --ssh_config
    --remote_spur --connect_timeout --detach --job_name --poll_interval --aws_endpoint_url --help"
  case "$command" in
    config) _spur_action_or "default show validate" "--config_file --mixed_precision --force" files ;;
    launch|test)
      if [[ "$cur" == -* ]]; then _spur_offer "$launch_flags"; else _spur_files "$cur"; fi ;;
    runs) _spur_action_or "list show export config logs rename rm tag note import summarise" \
            "--history --json --format --metrics --output --rank --follow --remove --force --again --project --status \
             --tag --since --limit --offset --check --slurm" ;;
    sagemaker) _spur_action_or "follow stop describe" "--config_file --region --profile --aws_endpoint_url --poll_interval" ;;
    env) _spur_offer "--json --config_file" ;;
    shard-plan)
      _spur_offer "--dataset_len --batch_size --num_processes --split_batches --even_batches --drop_last --iterable --help" ;;
    *) COMPREPLY=() ;;
  esac
}
complete -o default -F _spur spur
