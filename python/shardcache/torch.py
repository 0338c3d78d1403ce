"""shardcache.torch: the loader where code expects a torch Dataset.

    from shardcache.torch import IterableDataset
    ds = IterableDataset(loader)
    dl = torch.utils.data.DataLoader(ds, batch_size=None)   # batches come whole
    for epoch in range(epochs):
        ds.set_epoch(epoch)
        for batch in dl:                 # {"images": ..., "labels": ..., "ids": ...}
            ...

Code built around DataLoader (or a framework's train_dataloader()) takes it
unchanged: len(dl) is this rank's batches per epoch, set_epoch as with
DistributedSampler (without it each pass is the next epoch), state_dict()
the loader's.  The loader already batches, shuffles, prefetches and shards:
give DataLoader batch_size=None and no workers (its worker processes would
each need a loader of their own; the loader's producers are C threads).
"""
import torch

import shardcache

__all__ = ["IterableDataset"]


class IterableDataset(torch.utils.data.IterableDataset):
    """A shardcache.Loader as a torch IterableDataset: each item is one batch,
    a dict of its fields' tensors, plus its sample ids under `ids_key`
    (None: left out); with the loader's batch_transform, what it returns."""

    def __init__(self, loader, ids_key="ids"):
        super().__init__()
        if ids_key is not None and ids_key in dict.fromkeys(f[0] for f in loader.fields):
            raise ValueError(f"ids_key='{ids_key}' is also a field's name: pick another "
                             "(or None)")
        self.loader, self.ids_key = loader, ids_key

    def set_epoch(self, epoch):
        self.loader.set_epoch(epoch)

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        if torch.utils.data.get_worker_info() is not None:
            raise ValueError("shardcache.torch.IterableDataset in a DataLoader worker: use "
                             "num_workers=0 (the loader's own producer threads do the work; "
                             "SC_PRODUCERS sets how many)")
        for batch in self.loader:
            if not isinstance(batch, shardcache.Batch):
                yield batch  # a batch_transform's result, as the loop would get it
                continue
            item = dict(batch)
            if self.ids_key is not None:
                item[self.ids_key] = batch.ids
            yield item

    def state_dict(self):
        """This rank's loader position (Loader.state_dict)."""
        return self.loader.state_dict()
