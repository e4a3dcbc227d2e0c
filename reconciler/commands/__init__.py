"""One module per `recon` verb: parse its arguments, call the engine, render."""
