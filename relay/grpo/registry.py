"""One registry mechanism for the algorithm's named parts (advantage estimators, policy losses): a decorator
registers an implementation under its config name, and a lookup of an unknown name is refused with the valid ones.

>>> shapes = Registry("shape")
>>> @shapes.register("square")
... def square(x):
...     return x * x
>>> shapes.get("square")(3), list(shapes), "circle" in shapes
(9, ['square'], False)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Named implementations of one ``kind``, in registration order (what the config reference lists)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator registering its function under ``name``; a second registration of a name is refused."""

        def decorator(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} '{name}' is already registered")
            self._items[name] = item
            return item

        return decorator

    def get(self, name: str) -> T:
        """The implementation registered under ``name``; an unknown name raises ValueError listing the valid ones."""
        if name not in self._items:
            raise ValueError(f"unknown {self.kind} '{name}'; valid: {sorted(self._items)}")
        return self._items[name]

    def remove(self, name: str) -> None:
        """Forget ``name`` (a test's own registration); no error when it is not there."""
        self._items.pop(name, None)

    __getitem__ = get

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
