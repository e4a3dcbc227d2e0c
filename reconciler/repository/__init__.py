"""Git, as the commands use it beyond reading specs: a commit checked out, the refs a
watch follows, and the specs of two commits compared."""
