"""A short training job for the production-like stack's scenarios (stdlib only).

Prints one numbered line a second (``adt-step i/N``), so a task log shows which of the job's lines
reached it, then writes a model file. ``--seconds N`` sets the length.
"""

import argparse
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--seconds", type=int, default=20)
args = parser.parse_args()
job = os.environ.get("TRAINING_JOB_NAME", "?")
for step in range(1, args.seconds + 1):
    print(f"adt-step {step}/{args.seconds} job={job}", flush=True)
    time.sleep(1)
model_dir = os.environ.get("SM_MODEL_DIR", "/opt/ml/model")
with open(os.path.join(model_dir, "done.txt"), "w") as fh:
    fh.write("done\n")
print(f"adt-done job={job}", flush=True)
