# Post C's all_reduce example (hxxjxw, 2022-08-09; the repository's README.md, Sources), made to
# run on a CPU. The post launches it with
#     python -m torch.distributed.launch --nproc_per_node 2 main.py
# and tests/launcher/torch_programs_check.py runs that line pasted into ddprun:
#     ddprun --local-rank-arg=underscore --nproc_per_node 2 main.py
# What was changed from the post, and nothing else:
#   - backend 'nccl' is 'gloo' (nccl needs GPUs);
#   - torch.cuda.set_device(args.local_rank) is gone (no GPU to pick);
#   - the tensor's device is torch.device("cpu") instead of torch.device("cuda", args.local_rank);
#   - the post's comments (in Chinese) are left out; its statements are unchanged, in its order,
#     one per line as the post meant them (its web page runs the lines together).
import torch
import argparse
import torch.distributed as dist
from torch.distributed import ReduceOp

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", default=-1, type=int)
args = parser.parse_args()

dist.init_process_group(backend='gloo')
world_size = torch.distributed.get_world_size()
print('全局进程数: ', world_size)

device = torch.device("cpu")
tensor = (torch.arange(world_size, dtype=torch.int64) + 1 + world_size * args.local_rank).to(device)
print(tensor)
dist.all_reduce(tensor, op=ReduceOp.SUM)
print(tensor)
