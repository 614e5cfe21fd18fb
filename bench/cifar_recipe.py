"""conf/train/cifar.yaml as a plain dict, for the GPU benchmarks, which run where neither Hydra nor OmegaConf is
installed (the GPU test machine); tests/models/test_gpu_bench_recipe.py keeps the two equal."""

RECIPE = {"epochs": 200, "batch_size": 128,
          "optimizer": {"name": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": False, "weight_decay": 5e-4,
                        "weight_decay_mode": "coupled"},
          "schedule": {"name": "cosine"}}
