"""Reference networks for end-to-end checks: CRAFT (``models.craft``) and ResNet-50 (``models.resnet``).

Both are built here with deterministic random initialisation: no weight downloads and no
torchvision dependency. They are plain ``torch.nn`` models; ``convgemm.patch`` runs them on
convgemm.
"""
