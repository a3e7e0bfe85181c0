"""Examples beside the trainers, over the same shared core: Keras `fit` (the TF2 form of
`multi_gpu_model`) and model parallelism with explicit device scopes.

  python -m examples.keras_fit --num_gpus=2 --dataset=synthetic --max_steps=200 \
      --save_checkpoint_steps=50 --train_dir=/tmp/cifar10_keras
  python -m examples.keras_two_outputs --num_gpus=2 --dataset=synthetic --steps=50
  python -m examples.model_parallel --num_gpus=2 --dataset=synthetic --steps=100
"""
