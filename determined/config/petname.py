"""Three-word random names ("adverb adjective animal") for default experiment descriptions."""
import random
from typing import Optional

ADVERBS = (
    "amazingly badly boldly briefly calmly carefully cheerfully closely correctly curiously deeply eagerly "
    "easily evenly fairly firmly freely gently gladly happily honestly jointly kindly lightly likely loudly "
    "mainly merely mostly neatly nicely openly overly partly politely quickly quietly rapidly really "
    "safely sharply simply slowly smoothly solely suddenly surely swiftly truly vastly warmly wholly wildly"
).split()
ADJECTIVES = (
    "able active amazed brave bright busy calm careful charming clean clever cosmic crisp curious daring "
    "eager early famous fancy fast fit fluent frank gentle glad golden grand happy helpful honest humble "
    "jolly keen kind lively loyal lucky mellow merry modest noble patient polite proud quick quiet rapid "
    "ready sharp shining smart steady sunny sweet tender tidy vast warm wise witty"
).split()
ANIMALS = (
    "ant badger bat bear beaver bee bison boar camel cat cheetah cod crab crane crow deer dingo dog dolphin "
    "dove duck eagle eel elk falcon ferret finch fox frog gecko goat goose hare hawk heron horse ibex "
    "jackal jaguar koala lark lemur lion llama lynx mole moose mouse newt otter owl panda parrot pig "
    "pony puma quail rabbit raven robin salmon seal shark sheep sloth snail swan tiger toad trout turtle "
    "walrus whale wolf wombat yak zebra"
).split()

_rng = random.Random()


def petname(rng: Optional[random.Random] = None) -> str:
    """A random three-word name such as ``"freely curious otter"``."""
    r = rng or _rng
    return f"{r.choice(ADVERBS)} {r.choice(ADJECTIVES)} {r.choice(ANIMALS)}"
