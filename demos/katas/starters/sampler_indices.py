"""DistributedSampler's indices.

Return the list of dataset indices that rank `rank` of `num_replicas` reads in epoch `epoch`, exactly as
torch.utils.data.DistributedSampler(dataset, num_replicas, rank, shuffle, seed, drop_last) does after
sampler.set_epoch(epoch), for a dataset of `dataset_len` samples.

    shuffle      a permutation of range(dataset_len) that every rank draws alike, and that changes with epoch
    padding      without drop_last, every rank gets the same number of indices: the list is padded to a
                 multiple of num_replicas by repeating indices from its beginning
    drop_last    with it, the tail that does not fill every rank is dropped instead
    sharding     which of the padded (or cut) list's indices are this rank's

Using DistributedSampler itself is refused: it is the answer. The checker compares your list with torch's
over many generated cases (sizes the replicas divide and do not, datasets smaller than the replicas,
shuffled or not, drop_last or not), each rank running its share of them.

    ddpfsdp kata check sampler-indices          ddpfsdp kata hint sampler-indices
"""


def distributed_sampler_indices(dataset_len, num_replicas, rank, shuffle, seed, epoch, drop_last):
    raise NotImplementedError("the indices this rank reads this epoch")
