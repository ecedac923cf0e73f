-- data/fashion_mnist.lua: Fashion-MNIST from Debian's dataset-fashion-mnist
-- -> images u8 (N,28,28), labels i64 (N) with classes 1..10.
local idx = require("ds.data.idx")
local errors = require("ds.errors")
local TensorDataset = require("ds.data.dataloader").TensorDataset
local S = require("ds.shape")

local M = {}

M.DEFAULT_ROOT = "/usr/share/datasets/fashion-mnist"
M.classes = { "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot" }

local prefix = { train = "train", test = "t10k" }

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- load{split = "train" | "test", root = dir}: a TensorDataset (images, labels) with .images, .labels, .classes
function M.load(opts)
  opts = opts or {}
  local split = opts.split or "train"
  if not prefix[split] then
    errors.raise(string.format("fashion_mnist: split must be \"train\" or \"test\", got %s", tostring(split)))
  end
  local root = opts.root or os.getenv("DS_FASHION_MNIST") or M.DEFAULT_ROOT
  local images_path = string.format("%s/%s-images-idx3-ubyte.gz", root, prefix[split])
  local labels_path = string.format("%s/%s-labels-idx1-ubyte.gz", root, prefix[split])
  for _, p in ipairs { images_path, labels_path } do
    if not exists(p) then
      errors.raise(string.format("fashion_mnist: %s not found; install the Debian package dataset-fashion-mnist "
        .. "(apt-get install dataset-fashion-mnist, or `make deps`)", p))
    end
  end
  local images, labels = idx.read(images_path), idx.read(labels_path)
  local n = images:size(1)
  if images.dtype ~= "u8" or images:dim() ~= 3 or images:size(2) ~= 28 or images:size(3) ~= 28 then
    errors.raise(string.format("fashion_mnist: %s holds %s %s, expected u8 (N,28,28)", images_path, images.dtype,
      S.str(images.shape)))
  end
  if labels.dtype ~= "u8" or labels:dim() ~= 1 or labels:size(1) ~= n then
    errors.raise(string.format("fashion_mnist: %s holds %s %s, expected u8 (%d)", labels_path, labels.dtype,
      S.str(labels.shape), n))
  end
  local ds = TensorDataset(images, labels:astype("i64") + 1)
  ds.images, ds.labels, ds.classes, ds.split = ds.tensors[1], ds.tensors[2], M.classes, split
  return ds
end

return M
