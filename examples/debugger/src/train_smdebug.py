"""The debugger example's loop as a script written for SageMaker Debugger's library (smdebug).

It makes its hook from the job's ``debughookconfig.json`` (``Hook.create_from_json_file``),
registers the model and the loss, says TRAIN or EVAL itself (``set_mode``), and reads its own
tensors back at the end (``create_trial``): smdebug's API, run unchanged. Where smdebug is not
installed, trainops offers a compatible ``smdebug`` package on the job's Python path.
"""

from __future__ import annotations

import smdebug.pytorch as smd
import torch
from smdebug.trials import create_trial
from torch import nn
from train import Net, evaluate, initialize, load, parse_args, train_epoch


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    train, test = load(args.train), load(args.test)
    model = Net()
    initialize(model, args.init)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    hook = smd.Hook.create_from_json_file()
    hook.register_hook(model)
    hook.register_loss(criterion)
    for epoch in range(1, args.epochs + 1):
        hook.set_mode(smd.modes.TRAIN)
        train_loss = train_epoch(model, train, args, criterion, optimizer)
        hook.set_mode(smd.modes.EVAL)
        test_loss, accuracy = evaluate(model, test, criterion)
        print(
            f"epoch={epoch} train_loss={train_loss:.4f} test_loss={test_loss:.4f} "
            f"test_accuracy={accuracy:.4f}",
            flush=True,
        )
    hook.close()
    trial = create_trial(hook.out_dir)
    print(
        f"trial: {len(trial.steps(mode=smd.modes.TRAIN))} TRAIN and "
        f"{len(trial.steps(mode=smd.modes.EVAL))} EVAL steps, {len(trial.tensor_names())} tensors",
        flush=True,
    )


if __name__ == "__main__":
    main()
