-- data/init.lua: ds.data: IDX files, Fashion-MNIST, TensorDataset, DataLoader and DistributedSampler.
local idx = require("ds.data.idx")
local dataloader = require("ds.data.dataloader")
local fashion_mnist = require("ds.data.fashion_mnist")
local distributed_sampler = require("ds.data.distributed_sampler")

local M = {
  read_idx = idx.read,
  fashion_mnist = fashion_mnist.load,
  fashion_mnist_classes = fashion_mnist.classes,
  TensorDataset = dataloader.TensorDataset,
  DataLoader = dataloader.DataLoader,
  DistributedSampler = distributed_sampler.DistributedSampler,
}

function M.install(ds) ds.data = M end

return M
