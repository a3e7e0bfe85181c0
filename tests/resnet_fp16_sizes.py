"""The shapes and settings the official TF1 ResNet's float16 port shares between its TF1 side
(tests/resnet_fp16_port.py) and its Keras port (tests/resnet_fp16_keras.py): shrunk from the
script's (resnet_size 8, one block a stage; 8 x 8 images; 2 examples a replica), its own
otherwise (num_filters 16, momentum 0.9, batch norm 0.997 / 1e-5, weight decay 1e-4, loss
scale 128), the schedule a constant rate."""

SIZE, CLASSES = 8, 10
RESNET_SIZE = 8
NUM_FILTERS = 16
PER_REPLICA = 2
BLOCK_STRIDES = (1, 2, 2)
WEIGHT_DECAY = 1e-4
MOMENTUM = 0.9
LEARNING_RATE = 0.1
BATCH_NORM_DECAY = 0.997
BATCH_NORM_EPSILON = 1e-5
LOSS_SCALE = 128
NO_GROWTH = 10 ** 9  # a dynamic scale's growth period past any comparison here


def num_blocks():
  """Blocks a stage: resnet_size = 6n + 2 (the script's check)."""
  if RESNET_SIZE % 6 != 2:
    raise ValueError("resnet_size must be 6n + 2:", RESNET_SIZE)
  return (RESNET_SIZE - 2) // 6
