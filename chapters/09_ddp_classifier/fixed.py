"""Post A's ResNet50 / CIFAR-10 training script, made right (PyTorch 1.13 and 2.x).

Post A (get_dist_info and friends) shows a DDP training script that cannot run as written. This
is that script with every fault fixed; each fix is marked `# FIX:` with what the post wrote.

    torchrun --nproc-per-node 2 fixed.py                 # GPUs, NCCL: the post's setting
    ddprun --standalone --nproc-per-node 2 fixed.py --fake-data --weights none

The second line is what the test `09_ddp_classifier_fixed_py` runs: CPU ranks on gloo,
torchvision's FakeData instead of CIFAR-10 (no download), no pretrained weights (no download
either), a few steps. It ends with one OK line once every rank holds the same parameters.
"""

import argparse
import os
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=0, help="stop each epoch after this many steps (0: all)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--data", default="./data")
    parser.add_argument("--fake-data", action="store_true",
                        help="torchvision.datasets.FakeData shaped like CIFAR-10: nothing to download")
    parser.add_argument("--weights", choices=["DEFAULT", "none"], default="DEFAULT",
                        help="ImageNet weights to start from (DEFAULT downloads them), or none")
    return parser.parse_args()


@contextmanager
def local_rank_zero_first(local_rank):
    """Post C's torch_distributed_zero_first, made safe (chapter 05): local rank 0 of each machine
    goes first while the others wait. Instead of a barrier, every rank takes part in one
    all_reduce(MIN) of a status, so a leader that fails tells the others at once; post C's leader
    skips its barrier and leaves them waiting until the timeout if it catches the error."""
    fine = torch.iinfo(torch.int32).max

    def publish(status):
        t = torch.tensor([status], dtype=torch.int32)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return t.item()

    if local_rank != 0:
        failed = publish(fine)  # waits until every leader has published
        if failed != fine:
            raise RuntimeError(f"rank {failed} failed while preparing the data")
    try:
        yield
    except BaseException:
        if local_rank == 0:
            publish(dist.get_rank())  # tell the waiting ranks, then let this error go on
        raise
    if local_rank == 0:
        failed = publish(fine)
        if failed != fine:
            raise RuntimeError(f"rank {failed} failed while preparing the data")


def main():
    args = parse_args()
    # FIX: the post calls init_process_group(backend='nccl') and nothing else. The launcher
    # (torchrun, ddprun) sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT; NCCL
    # needs a GPU per rank, so the backend follows what this machine has.
    use_cuda = torch.cuda.is_available()
    dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])  # torchrun and ddprun set it; a KeyError otherwise
    # FIX: the post's text says it calls get_dist_info() to print the job; its code never does.
    print(f"[rank {rank}/{world_size}] local_rank {local_rank}, backend {dist.get_backend()}",
          flush=True)

    # FIX: the post puts every rank on torch.device('cuda'), which is cuda:0 for all of them
    # (NCCL then fails with "Duplicate GPU detected"). One GPU per rank, chosen by LOCAL_RANK.
    if use_cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")

    # FIX: pretrained=True is deprecated since torchvision 0.13 (weights= replaces it), and
    # ResNet50's head has 1,000 ImageNet classes: CIFAR-10 has 10.
    weights = torchvision.models.ResNet50_Weights.DEFAULT if args.weights == "DEFAULT" else None
    with local_rank_zero_first(local_rank):  # the weights' download, once per machine
        model = torchvision.models.resnet50(weights=weights)
    model.fc = torch.nn.Linear(model.fc.in_features, 10)
    if use_cuda:
        # FIX (what the post's SyncBatchNorm line is for): BatchNorm over the global batch. In
        # PyTorch it needs GPUs; DDP refuses it on the CPU.
        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = model.to(device)
    # FIX: the post wraps DDP(model) without device_ids; on GPUs name this rank's one.
    model = DDP(model, device_ids=[local_rank] if use_cuda else None)

    transform = torchvision.transforms.ToTensor()
    if args.fake_data:
        dataset = torchvision.datasets.FakeData(size=20 * args.batch_size * world_size,
                                                image_size=(3, 32, 32), num_classes=10,
                                                transform=transform)
    else:
        # FIX: in the post every rank calls CIFAR10(download=True) at once: several processes
        # writing one archive. Local rank 0 downloads; the others wait, then find it complete.
        with local_rank_zero_first(local_rank):
            dataset = torchvision.datasets.CIFAR10(root=args.data, train=True, download=True,
                                                   transform=transform)
    sampler = DistributedSampler(dataset)
    dataloader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    # FIX: the post calls model.step(); DDP has no step(). The optimizer does.
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # the post does this right: a new shuffle every epoch
        for step, (data, target) in enumerate(dataloader):
            if args.steps and step == args.steps:
                break
            # FIX: the post feeds the batch as it comes, on the CPU, to a model on the GPU.
            data, target = data.to(device), target.to(device)
            output = model(data)
            loss = F.cross_entropy(output, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if rank == 0:
                print(f"[rank 0/{world_size}] epoch {epoch} step {step}: loss {loss.item():.4f}",
                      flush=True)

    # DDP's promise, checked: every replica holds the same parameters after training.
    flat = torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(world_size)]
    dist.all_gather(everyone, flat.to(device) if use_cuda else flat)
    identical = all(torch.equal(other.cpu(), flat) for other in everyone)
    if rank == 0:
        print(f"[rank 0/{world_size}] " + ("OK: every replica holds the same parameters"
                                           if identical else "MISMATCH: the replicas differ"),
              flush=True)
    # FIX: the post ends with torch.distributed.finalize(), which does not exist.
    dist.destroy_process_group()
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
