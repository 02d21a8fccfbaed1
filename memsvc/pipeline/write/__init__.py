"""The write direction: AddMemories, UpdateMemory, DeleteMemory, ForgetUser (path.py) and their review."""
