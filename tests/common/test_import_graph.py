"""The house drawn from imports: no circle between files of determined/ (a package importing its own modules
through its `__init__` is not a circle), imports under `if TYPE_CHECKING:` left out as annotations."""
from typing import Dict, List, Set

import grimp


def _graph() -> Dict[str, Set[str]]:
    graph = grimp.build_graph("determined", exclude_type_checking_imports=True)
    edges: Dict[str, Set[str]] = {}
    for module in graph.modules:
        targets = set(graph.find_modules_directly_imported_by(module))
        # a module's import of a package that contains it is its own package's __init__: not a circle
        edges[module] = {t for t in targets if not module.startswith(t + ".")}
    return edges


def circles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    on_stack: Set[str] = set()
    stack: List[str] = []
    found: List[List[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"p": set(), "p.x": {"p"}}) == []


def test_no_file_imports_itself_through_others() -> None:
    found = circles(_graph())
    assert not found, "import circles between files:\n" + "\n".join(" -> ".join(c) for c in found)
