"""Passes that run on the Dynamo graph, before AOTAutograd (Inductor's ``pre_grad_custom_pass``
slot): the training form of the gated MLP, which must be rewritten before the graph is split into
a forward and a backward (see ``gated_mlp``)."""
