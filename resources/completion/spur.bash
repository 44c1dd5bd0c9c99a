# SPDX-License-Identifier: Apache-2.0
# bash completion for spur: sub-commands, their actions and flags, files where a flag takes one.
_spur() {
  local cur prev command
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  command="${COMP_WORDS[1]}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "config launch test runs sagemaker env shard-plan --version --help" -- "$cur"))
    return
  fi
  case "$prev" in
    --config_file|--hostfile|--ssh_config|--remote_spur|--history|--output) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --mixed_precision) COMPREPLY=($(compgen -W "no fp16 bf16" -- "$cur")); return ;;
    --format) COMPREPLY=($(compgen -W "csv json" -- "$cur")); return ;;
  esac
  local launch_flags="--config_file --num_processes --num_machines --machine_rank --main_process_ip
    --main_process_port --mixed_precision --cpu --gpu_ids --gradient_accumulation_steps
    --num_cpu_threads_per_process --env --dry_run --grace_period --run_name --hosts --hostfile --ssh_config
    --remote_spur --connect_timeout --detach --job_name --poll_interval --help"
  case "$command" in
    config)
      if [ "$COMP_CWORD" -eq 2 ]; then
        COMPREPLY=($(compgen -W "default show validate --config_file" -- "$cur"))
      else
        COMPREPLY=($(compgen -f -- "$cur"))
      fi ;;
    launch|test)
      if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$launch_flags" -- "$cur"))
      else
        COMPREPLY=($(compgen -f -- "$cur"))
      fi ;;
    runs)
      if [ "$COMP_CWORD" -eq 2 ]; then
        COMPREPLY=($(compgen -W "list show export config logs rm tag note" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "--history --json --format --metrics --output --rank --follow --remove" -- "$cur"))
      fi ;;
    sagemaker)
      [ "$COMP_CWORD" -eq 2 ] && COMPREPLY=($(compgen -W "follow stop describe" -- "$cur")) ;;
    *) COMPREPLY=() ;;
  esac
}
complete -o default -F _spur spur
