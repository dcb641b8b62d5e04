"""A TensorFlow parameter server for SageMaker's ``parameter_server`` distribution.

Run by path with the job's Python (``python tf_ps_server.py``), so it needs TensorFlow and not
trainops. It reads ``TF_CONFIG`` (task type ``ps``), serves that task on CPU only, and runs
until it is stopped.
"""

import json
import os
import sys


def main() -> int:
    import tensorflow as tf

    config = json.loads(os.environ["TF_CONFIG"])
    task = config["task"]
    if task.get("type") != "ps":
        print(f"TF_CONFIG task is {task!r}, not a ps task", file=sys.stderr)
        return 2
    server = tf.distribute.Server(
        tf.train.ClusterSpec(config["cluster"]),
        job_name="ps",
        task_index=int(task["index"]),
        config=tf.compat.v1.ConfigProto(device_count={"GPU": 0}),
    )
    print(f"parameter server {task['index']} serving", flush=True)
    server.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
