"""Stage 6, serving: model servers the run starts through its backend, and how they use the machine.

``server`` (one vLLM OpenAI-compatible server: arguments, start, readiness, stop), ``policy`` (the run's policy
server across phases: weight reloads, stop before training), ``simulator`` (the fixed user simulator, served or an
external endpoint), ``hardware`` (CPU, GPUs and the precision ``native`` picks), ``cores`` (how servers and trainers
share CPU cores).
"""
