"""All-to-all, the collective of expert parallelism.

`input` and `output` each hold N chunks of k elements (N = comm.world_size). Send chunk j of your input to
rank j, and put what rank j sends you in chunk j of your output, as dist.all_to_all_single(output, input)
does with equal splits: a mixture-of-experts layer dispatches each expert's tokens this way.

Use point-to-point messages: comm.isend/comm.irecv (requests to .wait() on), comm.send/comm.recv. The checker
compares your output on every rank with torch's and counts each rank's messages: one chunk to every other
rank.

    ddpfsdp kata check all-to-all          ddpfsdp kata hint all-to-all
"""


def all_to_all(comm, output, input):
    raise NotImplementedError("chunk j of input to rank j; chunk j of output from rank j")
