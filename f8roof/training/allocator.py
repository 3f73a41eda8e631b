"""torch's CUDA caching allocator, simulated over a sequence of allocations and frees: what it
has allocated and what it has reserved from the device (torchtitan's `memory:` line is the
reserved peak, `torch.cuda.memory_stats()["reserved_bytes.all.peak"]`). Pure: no torch.

The rules, from c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch, 2.6-2.13; the constants in
c10/core/AllocatorConfig.h):
- every request is rounded up to a multiple of 512 bytes (`round_size`, kMinBlockSize);
- requests up to 1 MiB (kSmallSize) come from the small pool, larger ones from the large pool;
- blocks belong to the stream they were allocated on: a free block is handed out again only to
  a request on the same stream and pool (`get_free_block` searches the pool's set ordered by
  stream, then size), the smallest free block that holds the request (best fit);
- a block larger than the request is split where the remainder is worth keeping
  (`should_split`: at least 512 bytes in the small pool or with expandable segments, more than
  1 MiB in a large pool without them); a freed block merges with free neighbours in its
  segment (`free_block`, `try_merge_blocks`);
- where no free block holds a request, memory is reserved from the device: without expandable
  segments a new segment of `get_allocation_size` bytes (2 MiB for small requests, 20 MiB for
  large ones under 10 MiB, else the request rounded up to 2 MiB); with
  `expandable_segments:True` (torchtitan's run_train.sh) one segment per stream and pool that
  maps pages at its end (20 MiB large, 2 MiB small), folding a free tail into the new mapping
  (`find_expandable_block`, `map_block`, `try_allocate_expandable_block`);
- reserved memory is returned to the device only by `torch.cuda.empty_cache()` or when a
  `cudaMalloc` fails (`release_cached_blocks`), neither of which a training step that fits
  calls: reserved bytes only grow.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from f8roof.errors import ModelError

MIB = 2**20
MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = MIB  # kSmallSize: the largest small-pool request
SMALL_BUFFER = 2 * MIB  # kSmallBuffer: a small-pool segment, an expandable small page
LARGE_BUFFER = 20 * MIB  # kLargeBuffer: a large segment for 1-10 MiB, an expandable large page
MIN_LARGE_ALLOC = 10 * MIB  # kMinLargeAlloc
ROUND_LARGE = 2 * MIB  # kRoundLarge


class AllocatorError(ModelError):
    pass


class Stream(str, Enum):
    """The CUDA streams one rank of an FSDP2 step allocates on (torch's
    distributed/fsdp/_fully_shard/_fsdp_collectives.py: the all-gather's input and output on the
    copy-in stream, the reduce-scatter's output, the sharded gradients, on its own stream)."""

    COMPUTE = "compute"
    ALL_GATHER = "all-gather copy-in"
    REDUCE_SCATTER = "reduce-scatter"


@dataclass(frozen=True)
class Alloc:
    key: str
    bytes: int
    stream: Stream = Stream.COMPUTE


@dataclass(frozen=True)
class Free:
    key: str


@dataclass(frozen=True)
class AllocatorPeaks:
    """The allocated peak (and what each stream held at it, and the event it fell at) and what
    each stream's pools had reserved by the end, which is the reserved peak."""

    allocated_bytes: int
    allocated_at: str  # the key of the allocation the peak fell at
    allocated_by_stream: dict[Stream, int]
    reserved_by_stream: dict[Stream, int]

    @property
    def reserved_bytes(self) -> int:
        return sum(self.reserved_by_stream.values())

    def reserve_beyond(self, stream: Stream) -> int:
        """What the stream had reserved beyond what it held at the allocated peak."""
        return self.reserved_by_stream.get(stream, 0) - self.allocated_by_stream.get(stream, 0)


def round_size(size: int) -> int:
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def segment_size(size: int) -> int:
    """`get_allocation_size`: the segment a request reserves without expandable segments."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


@dataclass(eq=False)
class _Block:
    segment: int
    offset: int
    size: int
    free: bool = True
    prev: _Block | None = None
    next: _Block | None = None


@dataclass(eq=False)
class _Pool:
    """One stream's small or large pool: its segments' free blocks, and what it reserved."""

    small: bool
    expandable: bool
    free: list[_Block] = field(default_factory=list)
    tails: dict[int, _Block] = field(default_factory=dict)  # each segment's last block
    segments: int = 0
    reserved: int = 0

    def take(self, size: int) -> _Block:
        fits = (b for b in self.free if b.size >= size)
        found = min(fits, key=lambda b: (b.size, b.segment, b.offset), default=None)
        block = found if found is not None else self._reserve(size)
        self.free.remove(block)
        block.free = False
        remaining = block.size - size
        split = remaining >= MIN_BLOCK if self.small or self.expandable else remaining > SMALL_SIZE
        if split:
            rest = _Block(block.segment, block.offset + size, remaining, True, block, block.next)
            if block.next is not None:
                block.next.prev = rest
            else:
                self.tails[block.segment] = rest
            block.next, block.size = rest, size
            self.free.append(rest)
        return block

    def _reserve(self, size: int) -> _Block:
        if self.expandable:
            page = SMALL_BUFFER if self.small else LARGE_BUFFER
            tail = self.tails.get(0)
            have = tail.size if tail is not None and tail.free else 0
            mapped = -(-(size - have) // page) * page
            self.reserved += mapped
            if tail is not None and tail.free:
                tail.size += mapped
                return tail
            offset = tail.offset + tail.size if tail is not None else 0
            block = _Block(0, offset, mapped, True, tail)
            if tail is not None:
                tail.next = block
            self.tails[0] = block
            self.segments = 1
        else:
            reserved = segment_size(size)
            self.reserved += reserved
            block = _Block(self.segments, 0, reserved)
            self.tails[self.segments] = block
            self.segments += 1
        self.free.append(block)
        return block

    def give_back(self, block: _Block) -> None:
        block.free = True
        for other in (block.prev, block.next):
            if other is not None and other.free:
                self.free.remove(other)
                first, second = (other, block) if other is block.prev else (block, other)
                first.size += second.size
                first.next = second.next
                if second.next is not None:
                    second.next.prev = first
                else:
                    self.tails[first.segment] = first
                block = first
        self.free.append(block)


def simulate(events: Iterable[Alloc | Free], *, expandable: bool = True) -> AllocatorPeaks:
    """Run the events through the caching allocator's rules (module docstring)."""
    pools: dict[tuple[Stream, bool], _Pool] = {}
    live: dict[str, tuple[_Pool, _Block, Stream]] = {}
    held = dict.fromkeys(Stream, 0)
    total = peak = 0
    at, at_peak = "", dict(held)
    for event in events:
        if isinstance(event, Free):
            if event.key not in live:
                raise AllocatorError(f"free of {event.key!r}, which is not allocated")
            pool, block, stream = live.pop(event.key)
            held[stream] -= block.size
            total -= block.size
            pool.give_back(block)
            continue
        if event.key in live:
            raise AllocatorError(f"{event.key!r} is allocated twice")
        if event.bytes < 0:
            raise AllocatorError(f"{event.key!r}: bytes must be >= 0 ({event.bytes})")
        size = round_size(event.bytes)
        small = size <= SMALL_SIZE
        pool = pools.setdefault((event.stream, small), _Pool(small, expandable))
        block = pool.take(size)
        live[event.key] = (pool, block, event.stream)
        held[event.stream] += block.size
        total += block.size
        if total > peak:
            peak, at, at_peak = total, event.key, dict(held)
    reserved = dict.fromkeys(Stream, 0)
    for (stream, _), pool in pools.items():
        reserved[stream] += pool.reserved
    return AllocatorPeaks(peak, at, at_peak, reserved)
