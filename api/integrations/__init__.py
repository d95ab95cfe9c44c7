"""A plan handed to the schedulers people run: Ray placement groups (ray_placement.py), and the
sidecar of Slurm's job_submit.lua (slurm_submit.py, standard library only)."""
