"""B7: note the moment this rank runs (`start_R`), then exit."""

from stamps import stamp

stamp("start")
