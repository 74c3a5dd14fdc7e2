"""Build the self-distillation prompt set used to train headstart's draft heads.

Draft heads learn to predict the tokens that the target model (SmolLM2-135M-Instruct) is
about to produce, so their training data is the target's own answers to a large set of
user prompts (self-distillation). The heads only generalise if those prompts cover the
kinds of requests the target will see in use, so variety matters more than raw count.
Nothing can be downloaded in this project, so this module writes the prompts itself.

It combines hand-written phrasings (many ways of asking for the same thing) with
hand-written fillers (topics, tasks, code snippets, situations, and about sixty short
original passages) and procedurally drawn numbers, names and constraints, in nine
categories: chat, explain, howto, code, math, summarize, rewrite, list and qa.

Held-out eval: every filler list is split once, deterministically, and a slice of it
(about 15%, at least 2 items) is reserved for eval. Eval prompts are therefore built from
topics, passages, snippets and names that train never uses; phrasings are shared, so the
eval set measures generalisation to new content in the same request styles. Eval prompts
are additionally checked to never appear verbatim in train, and all prompts are unique.

Determinism: every random choice goes through ``random.Random`` seeded with a string
(string seeds are hashed with SHA-512, so PYTHONHASHSEED plays no part); the global random
state is never used. Ids are ``<category>-<5 digits>``: train ids count up from 00000 per
category and eval ids from 90000, so the two files never share an id.

Usage::

    python train/prompts.py --out-dir data/prompts --seed 0
"""

from __future__ import annotations

import argparse
import json
import random
import textwrap
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

CATEGORIES: tuple[str, ...] = (
    "chat",
    "explain",
    "howto",
    "code",
    "math",
    "summarize",
    "rewrite",
    "list",
    "qa",
)

# Train prompts per category (9000 in all; the smallest share is summarize, at 7.8%).
TRAIN_COUNTS: dict[str, int] = {
    "chat": 1100,
    "explain": 1200,
    "howto": 1000,
    "code": 1100,
    "math": 1100,
    "summarize": 700,
    "rewrite": 900,
    "list": 900,
    "qa": 1000,
}
EVAL_PER_CATEGORY = 20
EVAL_ID_OFFSET = 90000
EVAL_FRACTION = 0.15  # share of every filler list reserved for eval
MIN_EVAL_FILLERS = 2
MIN_CATEGORY_SHARE = 0.06
MAX_PROMPT_WORDS = 260
MULTI_DOC_WORDS = 200  # passage words allowed in one multi-document qa prompt
MAX_ATTEMPTS_PER_PROMPT = 200


class Passage(NamedTuple):
    """A short original passage with questions that it answers."""

    title: str
    text: str
    questions: tuple[str, ...]


class Snippet(NamedTuple):
    """A code snippet. ``goal`` and ``symptom`` are set only for buggy snippets."""

    lang: str
    code: str
    goal: str = ""
    symptom: str = ""


Fillers = Mapping[str, Sequence[Any]]
Generator = Callable[[random.Random, Fillers], str]

# ---------------------------------------------------------------------------------------
# Shared fillers
# ---------------------------------------------------------------------------------------

NAMES: tuple[str, ...] = (
    "Anna", "Ben", "Carlos", "Dara", "Elena", "Farid", "Grace", "Hiro", "Isla", "Jamal",
    "Kofi", "Lena", "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sam", "Tara",
    "Umar", "Vera", "Wei", "Ximena", "Yusuf", "Zoe", "Aiden", "Bianca", "Chen", "Diego",
    "Emma", "Felix", "Gita", "Hannah", "Ivan", "Julia", "Kai", "Liam", "Maya", "Noah",
    "Olivia", "Pablo", "Ravi", "Sofia", "Tomas", "Uma", "Victor", "Wanda", "Yara", "Zara",
    "Leo", "Mia", "Nina", "Oscar", "Ines", "Jonas", "Keiko", "Lucas", "Marta", "Nikhil",
)

CITIES: tuple[str, ...] = (
    "Lisbon", "Nairobi", "Kyoto", "Toronto", "Oslo", "Lima", "Hanoi", "Cape Town",
    "Melbourne", "Seville", "Vancouver", "Istanbul", "Marrakesh", "Edinburgh", "Montreal",
    "Buenos Aires", "Prague", "Seoul", "Copenhagen", "Mexico City", "Dublin", "Singapore",
    "Vienna", "Auckland", "Chicago", "Bangkok", "Athens", "Reykjavik", "Krakow", "Porto",
    "Cairo", "Helsinki", "Budapest", "San Francisco", "Amsterdam", "Barcelona", "Bogota",
    "Tallinn", "Zurich", "Osaka",
)

COUNTRIES: tuple[str, ...] = (
    "France", "Japan", "Brazil", "Kenya", "Canada", "Australia", "Egypt", "India", "Mexico",
    "Norway", "Peru", "Vietnam", "Italy", "Germany", "Spain", "Portugal", "Greece", "Turkey",
    "Morocco", "Argentina", "Chile", "Colombia", "Thailand", "Indonesia", "South Korea",
    "New Zealand", "Ireland", "Poland", "Sweden", "Finland", "Iceland", "Nigeria", "Ghana",
    "Ethiopia", "South Africa", "the Philippines", "Malaysia", "Switzerland", "Austria",
    "the Netherlands", "Belgium", "Denmark", "Hungary", "the Czech Republic", "Cuba",
    "Jamaica", "Nepal", "Mongolia", "Uruguay", "Tanzania",
)

JOBS: tuple[str, ...] = (
    "nurse", "software developer", "teacher", "electrician", "chef", "librarian", "pilot",
    "veterinarian", "graphic designer", "architect", "carpenter", "pharmacist", "journalist",
    "park ranger", "accountant", "dentist", "physical therapist", "translator",
    "data analyst", "photographer", "baker", "firefighter", "plumber", "marine biologist",
    "social worker", "farmer", "museum curator", "game designer", "flight attendant",
    "car mechanic", "urban planner", "event planner", "tour guide", "barista", "florist",
    "beekeeper", "sound engineer", "speech therapist", "landscape gardener", "bookseller",
)

HOBBIES: tuple[str, ...] = (
    "birdwatching", "rock climbing", "pottery", "chess", "baking", "photography", "knitting",
    "calligraphy", "gardening", "woodworking", "hiking", "watercolor painting",
    "playing the ukulele", "journaling", "origami", "stargazing", "cycling", "yoga",
    "fishing", "sketching", "learning magic tricks", "board games", "salsa dancing",
    "skateboarding", "bread making", "embroidery", "swimming", "running", "sewing",
    "model trains", "geocaching", "podcasting", "creative writing", "bonsai", "crochet",
    "kayaking", "camping", "coin collecting", "film photography", "jigsaw puzzles",
)

# Countable things for math word problems.
ITEMS: tuple[str, ...] = (
    "apples", "stickers", "marbles", "cookies", "pencils", "stamps", "trading cards",
    "seashells", "crayons", "balloons", "books", "postcards", "buttons", "beads", "oranges",
    "cupcakes", "toy cars", "coins", "paper cranes", "seed packets", "plums", "comic books",
)

WEEKDAYS: tuple[str, ...] = (
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
)

NUMBER_WORDS: dict[int, str] = {
    2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight",
    9: "nine", 10: "ten", 12: "twelve", 15: "fifteen", 20: "twenty",
}

# ---------------------------------------------------------------------------------------
# Original passages (summarize, rewrite and qa). Texts are wrapped here for readability
# and flattened to one paragraph when used.
# ---------------------------------------------------------------------------------------

PASSAGES: tuple[Passage, ...] = (
    Passage(
        "How a honeybee colony works",
        """A honeybee colony can contain tens of thousands of workers, but only one queen.
        Worker bees divide their labor by age: young bees clean cells and feed larvae, while
        older bees leave the hive to collect nectar and pollen. When a forager finds a rich
        patch of flowers, she returns and performs a waggle dance that tells her sisters the
        direction and distance. Nectar is stored in wax cells, where bees fan their wings to
        evaporate water until it thickens into honey.""",
        ("What do young worker bees do?", "How do bees tell each other where flowers are?"),
    ),
    Passage(
        "The Harbor Lane Library",
        """The Harbor Lane Library opened in 1962 in a converted fish warehouse. For decades
        it held only a few thousand books, but a donation from a retired sea captain in 1988
        added a large collection of maps and ship logs. Today the library runs a weekly
        storytelling hour for children and lends out fishing rods as well as books. Last year
        it recorded more than 14,000 visits, almost twice the number from a decade earlier.""",
        ("What was the library building before 1962?",
         "How many visits did the library record last year?"),
    ),
    Passage(
        "Why the sea has tides",
        """Tides are caused mainly by the Moon's gravity pulling on Earth's oceans. The water
        bulges slightly on the side facing the Moon and also on the opposite side, so most
        coastlines see two high tides and two low tides each day. The Sun also pulls on the
        oceans, although its effect is smaller. When the Sun and Moon line up, during new and
        full moons, their pulls combine and produce especially large tides called spring
        tides.""",
        ("What mainly causes tides?", "When do spring tides happen?"),
    ),
    Passage(
        "The Maple Street Bakery",
        """Rosa Delgado opened the Maple Street Bakery with one oven and a recipe for cardamom
        buns she learned from her grandmother. At first she baked only on weekends, selling
        out within two hours. After a local newspaper wrote about the buns, she hired two
        assistants and began opening five days a week. The bakery now sells about 600 buns
        every Saturday, and Rosa still mixes the first batch of dough herself at 4 a.m.""",
        ("Who taught Rosa the recipe for cardamom buns?",
         "How many buns does the bakery sell on a Saturday?"),
    ),
    Passage(
        "Composting at home",
        """Composting turns food scraps and garden waste into a dark, crumbly material that
        improves soil. Microbes do most of the work, breaking down materials as long as they
        have air, moisture and a mix of ingredients. Gardeners often talk about balancing
        'greens', such as vegetable peels and grass clippings, with 'browns', such as dry
        leaves and cardboard. A well-managed pile can be ready in a few months, while a
        neglected one may take a year or more.""",
        ("What are some examples of browns?", "What do microbes need to break down compost?"),
    ),
    Passage(
        "Gutenberg's printing press",
        """Around 1450, Johannes Gutenberg developed a printing press with movable metal type
        in Mainz, Germany. Before this, most books in Europe were copied by hand, which made
        them slow to produce and expensive. Gutenberg's system allowed printers to arrange
        individual letters, print many copies, and then reuse the letters for the next page.
        Within a few decades, print shops had spread to many European cities, and the number
        of books in circulation grew dramatically.""",
        ("Where did Gutenberg develop his press?",
         "How were most European books produced before the printing press?"),
    ),
    Passage(
        "The Riverside Community Garden",
        """The Riverside Community Garden started in 2015 on an empty lot that had been used
        as a parking area. Volunteers removed the gravel, brought in soil, and built forty
        raised beds. Each bed is rented for a small yearly fee, and the money pays for water
        and tools. The garden also keeps six beds for a nearby school, where students grow
        beans, squash and sunflowers as part of their science lessons.""",
        ("How many raised beds did the volunteers build?",
         "What do the students grow in the school beds?"),
    ),
    Passage(
        "Clever octopuses",
        """Octopuses are among the most intelligent invertebrates. They have a large brain for
        their size, but most of their neurons are located in their eight arms, which can
        taste and touch what they explore. In laboratories, octopuses have learned to open
        jars and find their way through simple mazes. They can also change the color and
        texture of their skin in a fraction of a second, which helps them hide from predators
        and surprise prey.""",
        ("Where are most of an octopus's neurons?", "Why do octopuses change their skin color?"),
    ),
    Passage(
        "New meeting room rules at Brightline",
        """Starting next Monday, the Brightline office will switch to a new system for the
        shared meeting rooms. Rooms must now be booked through the online calendar at least
        one hour in advance. Bookings longer than two hours will need approval from the office
        manager, Tomas Reyes. Unused bookings will be released automatically if nobody checks
        in within fifteen minutes. The goal is to make rooms easier to find during the busy
        mornings.""",
        ("Who must approve bookings longer than two hours?",
         "What happens if nobody checks in within fifteen minutes?"),
    ),
    Passage(
        "The Silk Road",
        """The Silk Road was not a single road but a network of trade routes linking China
        with Central Asia, the Middle East and the Mediterranean. Merchants carried silk,
        spices, paper, glassware and precious metals, usually passing goods along in stages
        rather than traveling the entire distance. Ideas moved along the routes too, including
        religions, technologies and artistic styles. Cities such as Samarkand grew wealthy as
        meeting points where traders rested and exchanged goods.""",
        ("Besides goods, what else traveled along the Silk Road?",
         "Why did cities like Samarkand grow wealthy?"),
    ),
    Passage(
        "The stages of sleep",
        """Sleep happens in cycles that last roughly ninety minutes. Each cycle moves through
        lighter stages, deep sleep, and rapid eye movement (REM) sleep, when most vivid dreams
        occur. Deep sleep is important for physical recovery, while REM sleep appears to help
        with memory and emotional processing. Adults who regularly get less than seven hours
        of sleep tend to report more trouble concentrating, and many experts recommend keeping
        a consistent bedtime, even on weekends.""",
        ("How long does a sleep cycle last?", "What is deep sleep important for?"),
    ),
    Passage(
        "The Lindenholm lantern festival",
        """Every October, the village of Lindenholm holds a lantern festival to mark the end of
        the apple harvest. Children spend the week before making paper lanterns at the village
        school, and families hang them along the path to the old mill. On the night of the
        festival, a brass band leads a slow walk from the church square to the mill, where
        cider and apple cake are served. The tradition began in 1921, when the harvest was so
        large that farmers celebrated late into the night.""",
        ("When did the lantern festival tradition begin?", "Where does the walk end?"),
    ),
    Passage(
        "Coral reefs",
        """Coral reefs are built by tiny animals called polyps, which produce hard skeletons of
        calcium carbonate. Many corals get their bright colors and much of their food from
        algae living inside their tissues. When water becomes too warm, corals can expel these
        algae and turn white, a process known as bleaching. Although reefs cover a small
        fraction of the ocean floor, they provide homes for an enormous variety of fish and
        other sea life.""",
        ("What is coral bleaching?", "What builds coral reefs?"),
    ),
    Passage(
        "Early bicycles",
        """Early bicycles looked very different from modern ones. One of the first, built in the
        early 1800s, had no pedals at all; riders pushed it along with their feet. Later
        designs added pedals to the front wheel, and some makers enlarged that wheel to
        increase speed, creating the high-wheeled 'penny-farthing'. These were fast but
        dangerous to fall from. The 'safety bicycle' of the 1880s, with two similar-sized
        wheels and a chain drive, set the basic shape that bicycles still have today.""",
        ("How did riders move the earliest bicycles?",
         "What features did the safety bicycle have?"),
    ),
    Passage(
        "The Westfield robotics team",
        """The robotics team at Westfield High School had only five members when it formed
        three years ago. Their first robot could barely drive in a straight line, and it
        finished last at the regional competition. The students spent the next summer
        rebuilding the drive system and learning to program sensors. This spring, their robot
        placed second out of thirty teams, and the team has grown to nineteen members,
        including several first-year students.""",
        ("Where did the team place this spring?", "How many members does the team have now?"),
    ),
    Passage(
        "How volcanoes erupt",
        """A volcano forms where molten rock, called magma, rises toward the surface. When magma
        erupts, it is called lava. Some volcanoes produce runny lava that flows gently over
        long distances, building wide, gently sloping mountains. Others have thick, sticky
        magma that traps gas, which can lead to explosive eruptions that throw ash high into
        the sky. Scientists monitor small earthquakes, ground swelling and gas emissions to
        estimate when an eruption might occur.""",
        ("What is magma called once it erupts?",
         "What do scientists monitor to predict eruptions?"),
    ),
    Passage(
        "One plant, many teas",
        """Tea comes from the leaves of a single plant, Camellia sinensis. The differences
        between green, black and oolong tea come mostly from how the leaves are processed
        after picking. For green tea, the leaves are heated soon after harvest to stop them
        from oxidizing. Black tea leaves are allowed to oxidize fully, which darkens them and
        gives a stronger flavor, while oolong falls somewhere in between. Herbal drinks such as
        peppermint or chamomile are often called tea, but they come from other plants.""",
        ("What makes black tea different from green tea?",
         "Do herbal teas come from the tea plant?"),
    ),
    Passage(
        "Remote work survey",
        """A survey of 400 employees at a mid-sized software company asked how they felt about
        working from home. About 62 percent said they preferred a mix of home and office days,
        while 23 percent wanted to work fully remotely. The most common complaint about remote
        work was feeling disconnected from colleagues, and the most common complaint about the
        office was the commute. Managers plan to test a schedule with two fixed office days
        each week starting in March.""",
        ("What percentage of employees preferred a mix of home and office days?",
         "What was the most common complaint about the office?"),
    ),
    Passage(
        "Penguins beyond the ice",
        """Penguins are birds that cannot fly, but they are excellent swimmers. Their wings have
        evolved into stiff flippers, and their dense, overlapping feathers keep them warm and
        waterproof. Although people often picture them on Antarctic ice, several species live
        in warmer places, including the coasts of South America, southern Africa and even the
        Galapagos Islands. Many penguins return to the same breeding site each year, and some
        species take turns with their partners keeping an egg warm.""",
        ("Where do some penguin species live besides Antarctica?",
         "What keeps penguins warm and waterproof?"),
    ),
    Passage(
        "Pepper comes home",
        """On Tuesday evening, a small brown dog named Pepper slipped out of her yard on Cedar
        Road. Her owner, Ines Kowalski, posted a photo online, and within an hour neighbors
        were sharing it. A bus driver spotted Pepper near the train station the next morning
        and called the number on her collar. Ines says Pepper was tired and hungry but
        unharmed, and she has since fixed the loose board in the fence.""",
        ("Who found Pepper?", "How did Pepper get out of the yard?"),
    ),
    Passage(
        "How a rainbow forms",
        """A rainbow appears when sunlight shines through raindrops in the air. Each drop acts
        like a tiny prism: light bends as it enters the drop, reflects off the back, and bends
        again as it leaves. Because different colors bend by slightly different amounts, white
        light spreads out into a band of colors. To see a rainbow, you need the sun behind you
        and rain in front of you, which is why rainbows are common in the late afternoon after
        a shower.""",
        ("Why does white light separate into colors in a raindrop?",
         "Where must the sun be for you to see a rainbow?"),
    ),
    Passage(
        "Clocks Through Time",
        """The city museum's new exhibit, 'Clocks Through Time', displays more than eighty
        timekeeping devices. Visitors begin with sundials and water clocks, then move through
        rooms of pendulum clocks and pocket watches. The highlight is a large astronomical
        clock built in 1790, which shows the phases of the moon and has been restored to
        working order. The exhibit runs until the end of August, and entry is free for
        visitors under sixteen.""",
        ("What does the astronomical clock show?", "Who can visit the exhibit for free?"),
    ),
    Passage(
        "How solar panels make electricity",
        """Solar panels turn sunlight into electricity using materials called semiconductors,
        usually silicon. When light hits the panel, it knocks electrons loose, and the panel's
        structure pushes those electrons to flow in one direction as an electric current.
        Panels produce direct current, so homes use a device called an inverter to convert it
        into the alternating current used by household appliances. Output depends on the angle
        of the panels, the weather and the time of day.""",
        ("What does an inverter do?", "What material are most solar panels made from?"),
    ),
    Passage(
        "Northern Line weekend closures",
        """The regional rail authority has announced that the Northern Line will close for
        repairs on the first two weekends of May. During the closure, replacement buses will
        run every twenty minutes between Hillcrest and Dunmore, stopping at all stations.
        Journeys are expected to take about thirty minutes longer than usual. Tickets bought
        for the train will be valid on the buses, and bicycles will not be allowed on
        board.""",
        ("How often will the replacement buses run?",
         "Are bicycles allowed on the replacement buses?"),
    ),
    Passage(
        "Science at the bottom of the world",
        """Antarctica has no permanent population, but thousands of scientists and support staff
        live there for part of the year. Research stations study topics such as climate
        history, ice movement, wildlife and the upper atmosphere. Ice cores drilled from deep
        in the ice sheet contain tiny bubbles of ancient air, which let researchers measure
        what the atmosphere was like long ago. During the long winter, only a small crew stays
        at most stations because the weather makes travel extremely difficult.""",
        ("What can ice cores tell scientists?", "Why do only small crews stay during winter?"),
    ),
    Passage(
        "A short history of chess",
        """Chess developed from a game played in India around the sixth century, which spread to
        Persia and then to the Arab world and Europe. Over the centuries the rules changed; the
        queen, once a weak piece that moved one square diagonally, became the most powerful
        piece on the board in the late 1400s. This change made the game faster and more
        aggressive. Today chess is played by millions of people, and computer programs can
        beat the strongest human players.""",
        ("Where did chess originate?", "How did the queen change over time?"),
    ),
    Passage(
        "The hidden life of fungi",
        """Mushrooms are only the visible, fruiting part of a much larger organism. Most of a
        fungus lives underground or inside wood as a web of thin threads called mycelium. In
        forests, many fungi connect with tree roots, trading minerals and water for sugars that
        the trees make through photosynthesis. Fungi are also key decomposers, breaking down
        fallen leaves and dead wood so that their nutrients return to the soil.""",
        ("What is mycelium?", "What do fungi get from trees in exchange for minerals?"),
    ),
    Passage(
        "Thursday cooking class",
        """The community center's Thursday cooking class is designed for people who have never
        cooked a full meal. Each week, the instructor, Priya Nair, teaches one simple dish,
        such as vegetable soup, fried rice or baked fish. Participants work in pairs at small
        stations and take home whatever they make. The class costs twenty dollars per session,
        which covers all ingredients, and it is limited to twelve people so that everyone gets
        help.""",
        ("How much does each session cost?", "Why is the class limited to twelve people?"),
    ),
    Passage(
        "The human heart",
        """The human heart is a muscular pump about the size of a fist. It has four chambers:
        two upper chambers, called atria, receive blood, and two lower chambers, called
        ventricles, push it out. The right side sends blood to the lungs to pick up oxygen,
        while the left side pumps oxygen-rich blood to the rest of the body. Valves between
        the chambers keep blood flowing in one direction, and their closing makes the familiar
        sound of a heartbeat.""",
        ("What do the ventricles do?", "What causes the sound of a heartbeat?"),
    ),
    Passage(
        "A tool-sharing app",
        """Two university friends, Kofi Mensah and Lena Park, built an app that helps neighbors
        share tools such as ladders, drills and lawnmowers. Users list items they are willing
        to lend, and borrowers can reserve them for up to three days. The app started in a
        single apartment complex last year and now has about 5,000 users in four
        neighborhoods. The founders say the most borrowed item so far is, surprisingly, a
        carpet cleaner.""",
        ("How long can borrowers reserve an item?", "What is the most borrowed item?"),
    ),
    Passage(
        "Bird migration",
        """Every year, billions of birds migrate between breeding grounds and wintering areas.
        Some small songbirds fly thousands of kilometers, often at night, when the air is
        cooler and predators are fewer. Birds seem to use several cues to find their way,
        including the position of the sun, the patterns of stars, landmarks and Earth's
        magnetic field. Before migrating, many species eat heavily and store fat, which acts
        as fuel for the long journey.""",
        ("Why do some birds migrate at night?", "What cues do birds use to find their way?"),
    ),
    Passage(
        "This week's weather",
        """Forecasters expect a mild and dry start to the week, with afternoon temperatures
        around 18 degrees. A cold front will arrive on Wednesday evening, bringing heavy rain
        and strong winds along the coast. Temperatures will fall to about 9 degrees by
        Thursday, and some hill areas may see their first frost of the season on Friday
        morning. Drier weather should return over the weekend, though it will stay cool.""",
        ("When will the cold front arrive?", "Where might there be frost on Friday?"),
    ),
    Passage(
        "Flat maps of a round world",
        """For centuries, mapmakers have faced a basic problem: Earth is round, but maps are flat.
        Any flat map must stretch or squeeze some parts of the globe. The Mercator projection,
        created in 1569, keeps directions accurate, which made it popular with sailors, but it
        greatly enlarges areas near the poles. That is why Greenland looks about as large as
        Africa on many world maps, even though Africa is roughly fourteen times bigger.""",
        ("Why was the Mercator projection popular with sailors?",
         "Why does Greenland look so large on many world maps?"),
    ),
    Passage(
        "The Oak Hill book club",
        """The Oak Hill book club meets on the last Sunday of every month in the back room of a
        local cafe. Members take turns choosing the book, and the only rule is that it must be
        under 400 pages. This month they read a mystery novel set on a night train, which
        split the group: half loved the twist ending, and half found it unbelievable. Next
        month's pick, chosen by a retired teacher named Victor, is a collection of short
        stories.""",
        ("What is the rule for choosing books?", "Who chose next month's book?"),
    ),
    Passage(
        "From river to tap",
        """Before tap water reaches homes, it usually passes through several treatment steps.
        First, chemicals are added that make small particles clump together so they can
        settle to the bottom. The water is then filtered through layers of sand and gravel to
        remove remaining particles. Finally, it is disinfected, often with chlorine, to kill
        harmful microbes. Treatment plants test the water many times a day to make sure it
        stays safe.""",
        ("What is often used to disinfect the water?", "What is the water filtered through?"),
    ),
    Passage(
        "Hannah's first marathon",
        """Hannah Okafor began running three years ago to manage stress at work. She started
        with one-kilometer jogs around her neighborhood and slowly increased her distance each
        month. Last Sunday, she finished her first marathon in four hours and twelve minutes,
        raising money for a children's reading charity. She says the hardest part was the
        final five kilometers, when a steady headwind made every step feel heavier.""",
        ("Why did Hannah start running?", "What was the hardest part of the marathon for her?"),
    ),
    Passage(
        "How glass is made",
        """Glass is made mainly from sand, which is mostly silica, heated with other ingredients
        such as soda ash and limestone until it melts. When the liquid cools quickly, its atoms
        do not have time to arrange into a regular crystal pattern, so the result is a hard
        but non-crystalline solid. Glassmakers have used this material for thousands of years
        for beads, bottles and windows. Modern glass can be strengthened, tinted or coated to
        reflect heat.""",
        ("What is the main ingredient of glass?",
         "Why doesn't glass form a regular crystal pattern?"),
    ),
    Passage(
        "Brookfield council votes on Elm Street",
        """At Monday's meeting, the Brookfield town council voted six to three to turn part of
        Elm Street into a pedestrian zone during summer weekends. Supporters said the change
        would help local cafes and make the street safer for families. Some shop owners
        worried that customers would have nowhere to park. The council agreed to open a
        temporary parking lot behind the fire station and to review the plan in October.""",
        ("What was the result of the vote?",
         "What did the council offer to address parking worries?"),
    ),
    Passage(
        "Why bread rises",
        """Yeast is a single-celled fungus that makes bread rise. When it is mixed into dough, it
        feeds on sugars and releases carbon dioxide gas and small amounts of alcohol. Kneading
        develops gluten, a stretchy network of proteins that traps the gas in tiny bubbles. In
        the oven, the gas expands, the alcohol evaporates, and the structure sets, leaving a
        light, airy loaf.""",
        ("What gas does yeast release?", "What does kneading develop?"),
    ),
    Passage(
        "Learning Portuguese one coffee at a time",
        """Omar moved to Lisbon for work without knowing any Portuguese. For the first month, he
        relied on a translation app, but he felt frustrated that he could not chat with his
        neighbors. He started taking an evening class twice a week and practiced by ordering at
        the same cafe every morning. After six months, he can hold simple conversations, and
        the cafe owner now greets him by name and corrects his grammar with a smile.""",
        ("How often does Omar attend his evening class?",
         "How did Omar practice outside of class?"),
    ),
    Passage(
        "Our Moon",
        """The Moon is Earth's only natural satellite and is about a quarter of Earth's width.
        It takes about 27 days to orbit Earth and the same amount of time to spin once on its
        axis, which is why we always see the same side. The dark patches visible from Earth
        are vast plains of ancient lava. Because the Moon has almost no atmosphere, footprints
        left by astronauts in 1969 could remain for a very long time.""",
        ("Why do we always see the same side of the Moon?",
         "What are the dark patches on the Moon?"),
    ),
    Passage(
        "Gull Point beach cleanup",
        """On Saturday morning, about sixty volunteers gathered at Gull Point Beach for the
        spring cleanup. Working in small groups, they collected more than 300 kilograms of
        litter in three hours. The most common items were plastic bottle caps, food wrappers
        and pieces of fishing rope. Organizers from the local surf club said the amount of
        litter was lower than last year, which they credit to new bins placed near the parking
        area.""",
        ("How much litter did the volunteers collect?",
         "Why do the organizers think there was less litter this year?"),
    ),
    Passage(
        "Recycling plastics",
        """Not all plastics are equally easy to recycle. Many plastic items carry a small number
        inside a triangle that identifies the type of plastic. Bottles made from types 1 and 2
        are widely accepted, while films, bags and mixed materials are harder to process. Food
        left in containers can contaminate a whole batch, so rinsing items helps. Even when
        recycled, plastic often becomes a lower-quality material, which is one reason reducing
        use is encouraged.""",
        ("What does the number inside the triangle mean?", "Why does rinsing containers help?"),
    ),
    Passage(
        "A stay at the Seaview Inn",
        """We stayed three nights at the Seaview Inn in late June. The room was small but
        spotless, and the balcony had a lovely view of the harbor. Breakfast was the
        highlight, with fresh bread and local fruit every morning. The only downside was noise
        from the bar downstairs, which lasted until after midnight on Friday. The staff kindly
        moved us to a quieter room for our last night.""",
        ("What was the highlight of the stay?", "How did the staff respond to the noise?"),
    ),
    Passage(
        "The Great Pyramid",
        """The Great Pyramid of Giza was built for the pharaoh Khufu more than 4,500 years ago.
        It was originally covered with smooth white limestone that would have shone in the
        sunlight, although most of that outer layer is now gone. Many archaeologists believe it
        was built by large, organized teams of paid workers, based on evidence from the
        workers' villages nearby. For thousands of years it was the tallest human-made
        structure in the world.""",
        ("Who was the Great Pyramid built for?",
         "What evidence suggests the builders were organized, paid workers?"),
    ),
    Passage(
        "Maya's hot chocolate experiment",
        """For the school science fair, Maya tested which type of cup kept hot chocolate warm the
        longest. She filled a paper cup, a ceramic mug, a glass and an insulated steel bottle
        with the same amount of hot chocolate and measured the temperature every five minutes.
        After thirty minutes, the steel bottle had lost only four degrees, while the paper cup
        had lost almost twenty. Maya concluded that the air gap in the bottle's double wall
        slowed heat loss.""",
        ("Which container kept the drink warm the longest?",
         "How often did Maya measure the temperature?"),
    ),
    Passage(
        "Life in the desert",
        """Deserts are defined by how little rain they receive, not by how hot they are. Some of
        the largest deserts on Earth are cold, including Antarctica. Plants in hot deserts
        survive with clever strategies: cacti store water in thick stems, and many desert
        plants have small or waxy leaves that lose less moisture. Animals often stay hidden
        during the heat of the day and become active at night, when temperatures drop.""",
        ("What defines a desert?", "How do cacti survive dry conditions?"),
    ),
    Passage(
        "A complaint about a backpack",
        """I ordered a blue backpack from your website on March 3 and received a green one on
        March 10. I contacted customer service the same day and was told a replacement would
        arrive within a week, but it is now March 24 and nothing has come. I would like either
        the correct backpack or a full refund, and I would appreciate a reply by the end of
        this week. My order number is 58213.""",
        ("What color backpack did the customer order?", "What does the customer want?"),
    ),
    Passage(
        "Lighthouses",
        """Before satellite navigation, lighthouses were essential for guiding ships along
        dangerous coasts. Each lighthouse had its own pattern of flashes, so sailors could
        tell which one they were seeing at night. In the 1820s, the French engineer Augustin
        Fresnel designed a lens made of rings of glass prisms that could focus light into a
        powerful beam visible far out at sea. Many lighthouses are now automated, and some
        have been turned into museums or guesthouses.""",
        ("How could sailors tell lighthouses apart at night?",
         "What did Augustin Fresnel design?"),
    ),
    Passage(
        "Water shut-off notice",
        """Dear residents, the water supply in Birch Court will be shut off on Thursday from
        9 a.m. to 3 p.m. while workers replace an old pipe under the main entrance. Please
        store some water for drinking and cooking before the work begins. The parking spaces
        near the entrance will be closed for the whole day, so we ask you to use the visitor
        lot on Pine Street. We apologize for the inconvenience and thank you for your
        patience.""",
        ("How long will the water be off?", "Where should residents park on Thursday?"),
    ),
    Passage(
        "How chili peppers traveled the world",
        """Chili peppers originated in the Americas and were unknown in Asia and Europe until
        the late 1400s. After traders carried them across the oceans, they spread remarkably
        quickly and became central to cuisines in places such as India, Thailand and Korea.
        The heat of a chili comes from a compound called capsaicin, which triggers pain
        receptors in the mouth. Birds do not feel this burning sensation, which may help the
        plants spread their seeds.""",
        ("Where did chili peppers originate?", "What compound makes chili peppers hot?"),
    ),
    Passage(
        "The Greenbay Youth Orchestra",
        """The Greenbay Youth Orchestra was founded by a music teacher who wanted students from
        all schools in the city to play together. Rehearsals take place every Saturday morning
        in a borrowed church hall. Instruments are lent free of charge to families who cannot
        afford them, thanks to donations from local businesses. The orchestra's winter
        concert, held in the town theater, sold all 450 seats for the first time this
        year.""",
        ("Where do rehearsals take place?",
         "How does the orchestra help families who cannot afford instruments?"),
    ),
    Passage(
        "Elephant families",
        """Elephants are the largest land animals alive today. They live in family groups led
        by an older female, called the matriarch, who remembers the locations of water and
        food over many years. Elephants communicate with rumbles so low that humans cannot
        hear them, and these sounds can travel several kilometers. Their trunks contain tens
        of thousands of muscles and can pick up something as small as a single peanut.""",
        ("Who leads an elephant family group?", "How far can elephant rumbles travel?"),
    ),
    Passage(
        "From accountant to carpenter",
        """After twelve years as an accountant, Daniel decided to become a carpenter. He kept his
        office job while taking weekend woodworking classes, and he built furniture for
        friends to practice. Two years later, he had enough orders to leave accounting. His
        income dropped at first, but he says he has never been happier, and his business now
        has a waiting list of three months.""",
        ("How did Daniel practice his woodworking?", "How long is his waiting list?"),
    ),
    Passage(
        "Messages under the ocean",
        """Before telephones, the fastest way to send a message over long distances was the
        electric telegraph. Operators tapped out messages in Morse code, a system of short and
        long signals representing letters and numbers. In 1858, a cable was laid across the
        Atlantic Ocean, though it failed after only a few weeks. A more durable cable was
        completed in 1866, and messages between Europe and North America that once took days
        by ship could be sent in minutes.""",
        ("What system did telegraph operators use?",
         "When was a durable transatlantic cable completed?"),
    ),
    Passage(
        "A new playground for Sunnyvale",
        """Parents at Sunnyvale Primary School raised 18,000 dollars over two years to replace
        the school's old playground. They held bake sales, a fun run and a second-hand book
        fair. The students voted on the design, choosing a climbing net, a wooden ship and a
        quiet corner with benches for reading. The new playground will be built during the
        summer holidays and should be ready for the first day of the new school year.""",
        ("What did the students choose for the design?",
         "When should the new playground be ready?"),
    ),
    Passage(
        "Surviving winter",
        """Hibernation helps some animals survive winters when food is scarce. During true
        hibernation, an animal's body temperature drops, its heartbeat slows, and it breathes
        far less often, saving a great deal of energy. Ground squirrels and some bats are
        well-known hibernators. Bears enter a lighter state: their body temperature falls only
        a little, and they can wake up fairly quickly if disturbed.""",
        ("What happens to an animal's body during true hibernation?",
         "How is a bear's winter sleep different?"),
    ),
    Passage(
        "A new menu at the Green Fork",
        """Starting in June, the Green Fork restaurant will offer a shorter menu that changes
        every two weeks. The chef, Marta Silva, says a smaller menu lets the kitchen use more
        ingredients from nearby farms and waste less food. Popular dishes like the mushroom
        risotto will stay, but most others will rotate with the seasons. To celebrate the
        change, the restaurant is offering a free dessert to anyone who books a table during
        the first week.""",
        ("Why is the restaurant shortening its menu?",
         "What is offered during the first week?"),
    ),
    Passage(
        "Where wind comes from",
        """Wind is air moving from areas of high pressure to areas of low pressure. These
        pressure differences are created mainly because the Sun heats Earth's surface
        unevenly. Along coasts, land warms faster than water during the day, so cooler air
        from the sea flows inland as a sea breeze. At night the pattern often reverses,
        because land also cools faster than water.""",
        ("What creates the pressure differences that cause wind?",
         "Why does a sea breeze blow inland during the day?"),
    ),
    Passage(
        "An internship at the local paper",
        """During my eight-week internship at a local newspaper, I wrote eleven short articles
        and helped edit the weekend section. At first I struggled to write quickly enough to
        meet deadlines, but the editor taught me to outline each story before starting. The
        most interesting assignment was covering a debate about a new bike lane. I learned
        that good reporting depends on talking to many people, not just the loudest ones.""",
        ("How many articles did the intern write?",
         "What technique helped the intern write faster?"),
    ),
    Passage(
        "The art of origami",
        """Origami is the art of folding paper into shapes without cutting or gluing.
        Traditional designs include cranes, frogs and boxes, while modern artists create
        astonishingly detailed insects and animals from a single square sheet. Engineers have
        borrowed origami ideas to design things that must fold compactly, such as solar panels
        for satellites. Many people learn the crane as their first model, and in Japan it is
        often associated with good luck and long life.""",
        ("What have engineers used origami ideas for?",
         "What is the crane associated with in Japan?"),
    ),
    Passage(
        "Apartment for rent",
        """Bright two-bedroom apartment on the third floor of a quiet building, five minutes'
        walk from Central Station. The kitchen was renovated last year and includes a
        dishwasher. There is no elevator, but the building has a shared garden and a locked
        bike room. Rent is 1,450 dollars per month, including water and heating, and the
        apartment is available from September 1. Pets are allowed with a small extra
        deposit.""",
        ("Is there an elevator in the building?", "What does the rent include?"),
    ),
    Passage(
        "The town that switched off its streetlights",
        """Last winter, the small town of Fernvale tried turning off half of its streetlights
        between midnight and 5 a.m. to save money and reduce light pollution. The council
        kept lights on at crossings, bus stops and the town square. Over the four-month trial,
        the town's electricity bill for street lighting fell by about a third, and the local
        astronomy club reported much clearer views of the night sky. A survey found that most
        residents supported keeping the change.""",
        ("Which places kept their lights on during the trial?",
         "How much did the street lighting bill fall?"),
    ),
    Passage(
        "How vaccines train the body",
        """Vaccines prepare the immune system to recognize a germ without a person having to
        get sick first. Many vaccines contain a weakened or inactive form of a germ, or just a
        harmless piece of it. The immune system responds by making antibodies and memory
        cells. If the real germ appears later, those memory cells recognize it quickly, and
        the body can fight it off before it causes serious illness.""",
        ("What do many vaccines contain?",
         "What happens if the real germ appears later?"),
    ),
)

# ---------------------------------------------------------------------------------------
# explain
# ---------------------------------------------------------------------------------------

SCIENCE_CONCEPTS: tuple[str, ...] = (
    "photosynthesis", "the water cycle", "plate tectonics", "natural selection",
    "the greenhouse effect", "black holes", "special relativity", "DNA replication",
    "the immune system", "antibiotic resistance", "the carbon cycle", "the Doppler effect",
    "static electricity", "magnetism", "nuclear fusion", "nuclear fission",
    "radioactive decay", "the periodic table", "chemical bonds", "acids and bases",
    "the pH scale", "osmosis", "diffusion", "cellular respiration", "mitosis", "meiosis",
    "the nervous system", "the circulatory system", "the digestive system", "hormones",
    "the placebo effect", "circadian rhythms", "entropy", "kinetic and potential energy",
    "Newton's three laws of motion", "friction", "buoyancy", "air pressure", "sound waves",
    "the electromagnetic spectrum", "the refraction of light", "the phases of the Moon",
    "solar eclipses", "the Big Bang theory", "dark matter", "exoplanets",
    "the life cycle of a star", "comets", "the ozone layer", "erosion", "the rock cycle",
    "earthquakes", "hurricanes", "ocean currents", "biodiversity", "food chains",
    "pollination", "symbiosis", "genetic inheritance", "dominant and recessive genes",
    "the scientific method", "peer review", "quantum entanglement", "superconductivity",
    "half-life", "catalysts", "fermentation", "the states of matter", "surface tension",
    "convection", "thermal conductivity", "electric circuits",
    "alternating and direct current", "semiconductors", "lightning", "the Coriolis effect",
    "metamorphosis in insects", "animal migration", "echolocation", "the human microbiome",
    "neuroplasticity", "memory formation", "allergies", "blood types", "absolute zero",
    "centripetal force", "probability", "prime numbers", "the Pythagorean theorem",
    "statistical significance", "the golden ratio", "exponential growth",
    "the Fibonacci sequence", "gravity", "tectonic hot spots", "seed dispersal",
)

TECH_CONCEPTS: tuple[str, ...] = (
    "the internet", "Wi-Fi", "GPS", "cloud computing", "machine learning",
    "neural networks", "large language models", "encryption", "public-key cryptography",
    "blockchain", "computer viruses", "operating systems", "computer memory", "CPUs",
    "GPUs", "compilers", "open-source software", "version control with Git",
    "APIs", "relational databases", "the domain name system", "HTTP cookies",
    "two-factor authentication", "password hashing", "data compression", "QR codes",
    "barcodes", "touchscreens", "lithium-ion batteries", "electric cars", "wind turbines",
    "3D printing", "Bluetooth", "5G networks", "fiber-optic cables", "satellites",
    "search engines", "recommendation algorithms", "virtual reality", "spam filters",
    "recursion in programming", "binary numbers", "algorithms", "Big O notation",
    "object-oriented programming", "unit testing", "software containers", "caching",
    "speech recognition", "digital cameras", "pixels and screen resolution",
    "noise-cancelling headphones", "smart thermostats", "RFID tags", "web browsers",
    "email delivery", "heat pumps", "LED lights",
)

SOCIETY_CONCEPTS: tuple[str, ...] = (
    "inflation", "supply and demand", "interest rates", "compound interest",
    "the stock market", "index funds", "progressive taxes", "budgeting", "credit scores",
    "opportunity cost", "the gig economy", "globalization", "central banks", "recessions",
    "the minimum wage", "insurance", "mortgages", "cryptocurrency", "GDP",
    "trade deficits", "democracy", "the separation of powers", "the census",
    "urbanization", "the tragedy of the commons", "cognitive biases", "confirmation bias",
    "the sunk cost fallacy", "game theory", "the prisoner's dilemma", "renewable energy",
    "carbon footprints", "copyright", "emotional intelligence", "the growth mindset",
    "the rules of haiku", "iambic pentameter", "perspective in drawing", "the color wheel",
    "musical scales", "the hero's journey", "metaphors and similes",
    "the three-act structure", "impressionism", "jazz improvisation",
    "exposure in photography", "the rule of thirds", "idioms", "dialects",
    "active listening", "the Pomodoro technique", "habit formation",
)

HISTORY_EVENTS: tuple[str, ...] = (
    "the fall of the Western Roman Empire", "the invention of the printing press",
    "the Industrial Revolution", "the French Revolution", "the American Revolution",
    "the Renaissance", "the Protestant Reformation", "the Black Death", "the Silk Road",
    "the Age of Exploration", "the building of the Great Wall of China",
    "the construction of the pyramids of Giza", "the Apollo 11 Moon landing",
    "the Cold War", "the fall of the Berlin Wall", "World War I", "the Great Depression",
    "the civil rights movement in the United States", "women's suffrage",
    "the Magna Carta", "the Meiji Restoration", "the Scientific Revolution",
    "the Enlightenment", "democracy in ancient Athens", "the Roman Republic",
    "the Mongol Empire", "the Ottoman Empire", "the Inca road system",
    "the Maya civilization", "the Viking Age", "the Norman conquest of England",
    "the Hundred Years' War", "the voyages of Zheng He",
    "the invention of writing in Mesopotamia", "the Code of Hammurabi",
    "the Library of Alexandria", "the California Gold Rush",
    "the first transcontinental railroad", "the invention of the telephone",
    "the Wright brothers' first flight", "the discovery of penicillin", "the Space Race",
    "the founding of the United Nations", "the end of apartheid in South Africa",
    "Indian independence", "the Marshall Plan", "the invention of the World Wide Web",
    "the Dust Bowl", "the Irish potato famine", "the unification of Germany",
    "the unification of Italy", "the Russian Revolution", "the Cuban Missile Crisis",
    "the Hanseatic League", "the Columbian exchange", "the ancient Olympic Games",
    "the Neolithic Revolution", "the decipherment of the Rosetta Stone",
    "the building of the Suez Canal", "the building of the Panama Canal",
    "the Great Fire of London", "the Harlem Renaissance", "the eradication of smallpox",
    "the Human Genome Project", "the invention of the steam engine",
)

WONDER_QUESTIONS: tuple[str, ...] = (
    "Why is the sky blue?", "Why does bread go stale?", "Why do onions make you cry?",
    "How does a refrigerator keep food cold?", "Why do we yawn?", "Why do cats purr?",
    "How does soap remove grease?", "Why do leaves change color in autumn?",
    "Why does ice float?", "How do airplanes stay in the air?", "Why do we get goosebumps?",
    "Why is the ocean salty?", "Why does popcorn pop?", "How does a microwave heat food?",
    "Why do we dream?", "Why does metal feel colder than wood at the same temperature?",
    "Why does the Moon look bigger near the horizon?",
    "Why does my voice sound different on recordings?", "How does a compass work?",
    "Why does coffee keep people awake?", "Why does hair turn gray?", "How does glue stick?",
    "Why do we have leap years?", "Why do time zones exist?", "Why do dogs wag their tails?",
    "How do bees make honey?", "Why do stars twinkle?", "Why are some people left-handed?",
    "Why do my ears pop on a plane?", "Why do fingers wrinkle in water?",
    "How does a thermostat work?", "Why do cut apples turn brown?",
    "Why does salt melt ice on roads?", "How does an elevator work?",
    "Why do we get hiccups?", "Why do shadows change length during the day?",
    "How do credit cards work?", "Why does music sometimes give people chills?",
    "Why does spicy food feel hot?", "Why are days longer in summer?",
    "How does a zipper work?", "How does a moving bicycle stay upright?",
    "Why does soda fizz?", "Why are bubbles round?", "How do fireworks get their colors?",
    "Why do we have fingerprints?", "Why do traffic jams form even without accidents?",
    "How do cats usually land on their feet?", "How does a lock and key work?",
    "Why does milk go sour?", "Why do people get jet lag?", "Why do we blush?",
    "How do plants know which way is up?", "Why does tea stain mugs?",
    "How does autocorrect guess words?", "Why do batteries run out?",
    "How does a sundial tell time?", "Why are some clouds dark?",
    "Why do some birds fly in a V formation?", "How does a smoke detector work?",
    "Why does Earth have seasons?", "How does sunscreen protect skin?",
    "Why do we need sleep?", "How do chameleons change color?",
    "How does a pressure cooker cook food faster?", "Why does paper turn yellow with age?",
    "Why do airplanes leave white trails in the sky?", "How do glasses correct vision?",
    "Why do knuckles crack?", "Why does rubber bounce?", "Why do mosquitoes bite some people more?",
    "How do noise-cancelling headphones block sound?", "Why does the wind howl?",
    "Why do cats knead with their paws?", "How do fish breathe underwater?",
    "Why do bananas turn brown?", "How does a toaster know when to pop up?",
)

COMPARE_PAIRS: tuple[tuple[str, str], ...] = (
    ("weather", "climate"), ("a virus", "a bacterium"), ("speed", "velocity"),
    ("mass", "weight"), ("an alligator", "a crocodile"), ("a simile", "a metaphor"),
    ("'affect'", "'effect'"), ("baking soda", "baking powder"), ("a latte", "a cappuccino"),
    ("a comet", "an asteroid"), ("stocks", "bonds"), ("a debit card", "a credit card"),
    ("HTTP", "HTTPS"), ("a tornado", "a hurricane"), ("a frog", "a toad"),
    ("nuclear fission", "nuclear fusion"), ("an ocean", "a sea"), ("a star", "a planet"),
    ("a turtle", "a tortoise"), ("a rabbit", "a hare"), ("a fruit", "a vegetable"),
    ("empathy", "sympathy"), ("a moth", "a butterfly"), ("jam", "jelly"),
    ("a compiler", "an interpreter"), ("Wi-Fi", "Bluetooth"), ("a recession", "a depression"),
    ("an atom", "a molecule"), ("hail", "sleet"), ("a dolphin", "a porpoise"),
    ("a cold", "the flu"), ("a novel", "a novella"), ("a hill", "a mountain"),
    ("an epidemic", "a pandemic"), ("bread flour", "all-purpose flour"),
    ("an LED bulb", "an incandescent bulb"), ("a lake", "a pond"),
    ("a museum", "an art gallery"), ("a democracy", "a monarchy"), ("AC", "DC electricity"),
    ("a meteor", "a meteorite"), ("herbs", "spices"), ("a crow", "a raven"),
    ("a condo", "an apartment"), ("a hypothesis", "a theory"), ("a bug", "an insect"),
)

EXPLAIN_PHRASINGS: tuple[str, ...] = (
    "Explain {c}.",
    "Can you explain {c} in simple terms?",
    "Help me understand {c}.",
    "I keep hearing about {c}. Can you explain the basics?",
    "Give me a clear explanation of {c}.",
    "How would you explain {c} to someone with no background in the subject?",
    "Break down {c} for me.",
    "What's the key idea behind {c}?",
    "Teach me the basics of {c}.",
    "Write a short explanation of {c}.",
    "Could you give me an overview of {c}?",
    "I'm confused about {c}. Can you help?",
    "What do I need to know about {c}?",
    "In a few sentences, explain {c}.",
    "Describe {c} and why it matters.",
    "Explain {c} with a concrete example.",
    "I'm studying for a test. Can you explain {c}?",
    "What are the most important things to understand about {c}?",
    "Give me an intuitive explanation of {c}.",
    "Explain {c} as if you were a friendly teacher.",
)

HISTORY_PHRASINGS: tuple[str, ...] = (
    "What caused {e}?",
    "Give me a short overview of {e}.",
    "Why was {e} important?",
    "What were the main consequences of {e}?",
    "Explain {e} as if I knew nothing about history.",
    "Tell me about {e}.",
    "What should everyone know about {e}?",
    "How did {e} change the world?",
    "Describe {e} and its lasting impact.",
    "I'm studying {e}. Can you give me the big picture?",
    "Who were the key people involved in {e}, and what did they do?",
    "Explain the background to {e}.",
    "What is the story of {e}?",
)

WONDER_PHRASINGS: tuple[str, ...] = (
    "{q}",
    "Quick question: {q}",
    "{q} Explain it simply.",
    'My kid asked me, "{q}" What should I tell them?',
    "I've always wondered: {q}",
    "{q} I'd like the science behind it.",
    "Here's something I never understood. {q}",
    "{q} Please keep the explanation short.",
    "Settle a debate for me: {q}",
)

COMPARE_PHRASINGS: tuple[str, ...] = (
    "What is the difference between {a} and {b}?",
    "How is {a} different from {b}?",
    "{A} vs. {b}: what's the difference?",
    "People often mix up {a} and {b}. How do they differ?",
    "Explain the difference between {a} and {b} with an example.",
    "Compare {a} and {b}. What do they have in common, and how are they different?",
)

EXPLAIN_CONSTRAINTS: tuple[str, ...] = (
    "Keep it under 100 words.",
    "Use a simple analogy.",
    "Imagine you're explaining it to a 10-year-old.",
    "Include one real-world example.",
    "Answer in three sentences.",
    "Avoid jargon, please.",
    "I'm a complete beginner.",
    "Use bullet points.",
    "Mention a common misconception too.",
    "End with a one-sentence summary.",
    "Explain it for a high school student.",
    "Keep it to one short paragraph.",
    "Give an example from everyday life.",
    "Make it fun to read.",
    "Please be precise but brief.",
)

EXPLAIN_PREFIXES: tuple[str, ...] = (
    "I have an exam tomorrow.",
    "My child asked me about this and I didn't know what to say.",
    "I'm writing a school report.",
    "I read about this in the news.",
    "This came up at dinner last night.",
    "I'm a nurse, not a scientist, so go easy on me.",
    "I'm preparing a short talk for my book club.",
)

# ---------------------------------------------------------------------------------------
# howto
# ---------------------------------------------------------------------------------------

HOWTO_TASKS: tuple[str, ...] = (
    "make a cup of pour-over coffee", "fix a flat bicycle tire",
    "boil an egg so the yolk stays soft", "start a vegetable garden on a balcony",
    "set up a monthly budget", "write a cover letter", "clean a cast-iron pan",
    "tie a tie", "change a car tire", "prepare for a job interview",
    "learn to juggle three balls", "make a paper airplane that flies far",
    "bake a loaf of banana bread", "brew a good pot of tea", "back up the photos on my phone",
    "create a strong password I can remember", "train a puppy to sit",
    "clean windows without leaving streaks", "hang a picture frame straight",
    "unclog a bathroom sink", "make pizza dough at home", "plan a road trip",
    "pack a suitcase efficiently", "start running as a beginner", "meditate for ten minutes",
    "fold a fitted sheet", "remove a coffee stain from a shirt", "repot a houseplant",
    "make a simple budget spreadsheet", "organize a small closet", "write a thank-you note",
    "sharpen a kitchen knife", "cook rice on the stove", "make a fruit smoothie",
    "start journaling", "learn a new language on my own", "memorize a short speech",
    "give a good presentation", "set up a freshwater fish tank", "care for a succulent",
    "make cold brew coffee", "do a push-up with good form", "stretch after a run",
    "build a campfire safely", "pitch a tent", "read a topographic map",
    "fold a paper crane", "knit a simple scarf", "sew a button back on",
    "iron a dress shirt", "paint a room", "patch a small hole in drywall",
    "change the batteries in a smoke detector", "defrost a freezer", "descale a kettle",
    "clean a laptop keyboard", "speed up a slow computer", "take a screenshot on a laptop",
    "set up a home Wi-Fi network", "make a simple web page with HTML",
    "install Python on my computer", "write my first Python program", "start a podcast",
    "edit a video on my phone", "take better photos with my phone", "write a short story",
    "start a book club", "host a dinner party for six people",
    "plan a surprise birthday party", "make a weekly meal plan",
    "save money on groceries", "negotiate a higher salary", "ask for feedback at work",
    "run an effective meeting", "write a professional email",
    "organize my receipts for tax season", "start a compost bin", "grow basil indoors",
    "make a bird feeder from a plastic bottle", "teach a child to ride a bike",
    "make a family tree", "learn to touch type", "improve my handwriting",
    "fall asleep faster", "build a morning routine", "stop procrastinating on a big project",
    "make new friends in a new city", "write a haiku", "make a quick tomato sauce",
    "roast vegetables in the oven", "make pancakes from scratch", "poach an egg",
    "cook pasta perfectly", "make guacamole", "pickle cucumbers",
    "make a simple salad dressing", "store fresh herbs", "keep cut flowers fresh longer",
    "wash a wool sweater", "polish leather shoes", "clean a microwave",
    "get rid of fruit flies", "declutter my desk", "set up a cozy reading corner",
    "play three basic chords on a guitar", "tune a guitar", "practice piano efficiently",
    "draw a simple portrait", "start birdwatching", "find constellations in the night sky",
    "prepare for a long hike", "choose good running shoes", "care for a new kitten",
    "introduce a new cat to my dog", "wash a car by hand", "check the oil level in a car",
    "parallel park", "plan a study schedule for exams", "take good notes in a lecture",
    "write a strong essay introduction", "cite a source in an essay",
    "read a research paper", "give a toast at a wedding", "apologize sincerely",
    "say no politely", "set boundaries with a coworker",
    "prepare an emergency kit for my home", "make a photo album", "arrange a cheese board",
    "make yogurt at home", "make sauerkraut", "bake chocolate chip cookies",
    "make a French omelette", "grill vegetables", "clean a wooden cutting board",
    "reset my home router", "write a resume", "learn to swim as an adult",
    "make a simple kite", "build a small bookshelf", "fix a squeaky door hinge",
    "bleed a radiator", "keep a sourdough starter alive", "plan a picnic",
    "teach a dog to come when called", "find volunteer work in my community",
    "write a letter to my future self", "make a to-do list that actually works",
    "track my spending", "set up an automatic savings plan",
    "prepare my garden for winter", "shovel snow without hurting my back",
    "make hot chocolate from scratch", "decorate a cake simply", "wrap a present neatly",
    "clean a stainless steel sink", "make iced tea", "brush a dog's teeth",
    "organize digital files on my computer", "learn to read sheet music",
)

HOWTO_PHRASINGS: tuple[str, ...] = (
    "How do I {t}?",
    "What are the steps to {t}?",
    "Give me step-by-step instructions to {t}.",
    "Can you walk me through how to {t}?",
    "I want to {t}. Where do I start?",
    "Write a numbered list of steps for how to {t}.",
    "What's the easiest way to {t}?",
    "Explain how to {t}, step by step.",
    "I've never tried to {t} before. How should I go about it?",
    "Teach me how to {t}.",
    "What do I need, and what steps should I follow, to {t}?",
    "Could you give me a simple guide to help me {t}?",
    "What's the best way to {t}?",
    "Help! I need to {t} today. What do I do?",
)

HOWTO_CONSTRAINTS: tuple[str, ...] = (
    "Keep it to five steps.",
    "I don't have any special tools.",
    "I'm a total beginner.",
    "Mention common mistakes to avoid.",
    "List what I need first.",
    "Keep each step short.",
    "I only have about 20 minutes.",
    "Include safety tips where relevant.",
    "Assume I'm on a tight budget.",
    "Please number the steps.",
    "Explain why each step matters.",
    "Give me a quick version and a more detailed version.",
)

HOWTO_CONTEXTS: tuple[str, ...] = (
    "I live in a small apartment.",
    "I'm a student with very little money.",
    "My friend said it's easy, but I'm not so sure.",
    "I tried once before and it didn't go well.",
    "I want to do this with my kids.",
    "I'm doing this for the first time this weekend.",
)

# ---------------------------------------------------------------------------------------
# code
# ---------------------------------------------------------------------------------------

CODE_TASKS: tuple[str, ...] = (
    "reverses a string", "checks whether a number is prime", "counts the vowels in a string",
    "returns the largest number in a list", "removes duplicates from a list but keeps the order",
    "checks whether a word is a palindrome", "computes the factorial of a number",
    "returns the nth Fibonacci number", "merges two sorted lists into one sorted list",
    "finds the second largest number in a list", "converts Celsius to Fahrenheit",
    "counts how many times each word appears in a sentence",
    "flattens a nested list one level deep",
    "capitalizes the first letter of every word in a sentence",
    "checks whether two strings are anagrams", "returns the sum of the digits of an integer",
    "finds the most common element in a list", "splits a list into chunks of a given size",
    "checks whether a string looks like an email address",
    "generates a random password of a given length",
    "converts a number of seconds into hours, minutes and seconds",
    "checks whether a year is a leap year", "returns the average of a list of numbers",
    "finds the longest word in a sentence", "rotates a list by k positions",
    "removes all whitespace from a string",
    "calculates the greatest common divisor of two numbers",
    "converts a decimal number to binary", "checks whether a list is sorted",
    "returns the items that appear in both of two lists",
    "counts the number of lines in a text file", "reads a CSV file and prints each row",
    "sorts a list of dictionaries by a given key", "does a binary search on a sorted list",
    "sorts a list with bubble sort", "transposes a matrix given as a list of lists",
    "checks whether the parentheses in a string are balanced",
    "compresses a string like 'aaabb' into 'a3b2'", "keeps only the even numbers in a list",
    "reverses each word in a sentence but keeps the word order",
    "computes the running total of a list of numbers",
    "finds the first repeated character in a string",
    "returns the number of days between two dates",
    "formats a number with commas as thousands separators",
    "generates the first n prime numbers", "calculates the area of a circle from its radius",
    "checks whether a number is a perfect square", "returns the median of a list of numbers",
    "groups a list of words by their first letter", "converts a list of pairs into a dictionary",
    "swaps the keys and values of a dictionary",
    "finds the missing number in a list containing 1 to n",
    "counts the uppercase letters in a string",
    "shortens a string to a maximum length and adds '...' at the end",
    "removes punctuation from a string", "checks whether a string contains only digits",
    "returns the n largest items in a list", "calculates compound interest",
    "converts kilometers to miles", "simulates rolling two dice and returns the total",
    "shuffles a list without using a built-in shuffle function",
    "finds all pairs of numbers in a list that add up to a target",
    "returns the longest common prefix of a list of strings",
    "converts a Roman numeral to an integer", "converts an integer to a Roman numeral",
    "checks whether a sentence uses every letter of the alphabet",
    "calculates body mass index from height and weight",
    "prints FizzBuzz for the numbers 1 to n",
    "counts how often each character appears in a string",
    "merges two dictionaries and adds up the values of shared keys",
    "finds the maximum depth of a nested list",
    "checks that a password has at least 8 characters, one digit and one uppercase letter",
    "converts snake_case to camelCase", "converts camelCase to snake_case",
    "returns the difference between the largest and smallest values in a list",
    "removes empty strings from a list", "checks whether all elements in a list are unique",
    "returns every other element of a list",
    "totals a shopping cart given as a list of items with prices and quantities",
    "filters a list of people down to those older than 18",
    "deep-copies a nested structure of lists and dictionaries",
    "parses a query string like 'a=1&b=2' into a dictionary",
    "returns today's date formatted as YYYY-MM-DD",
    "retries another function up to three times if it raises an error",
    "measures how long another function takes to run",
    "caches the results of an expensive function", "reads a JSON file and returns one field",
    "counts the words in a text file", "finds the first non-repeating character in a string",
    "prints a multiplication table for a given number",
    "prints a triangle of asterisks with n rows", "sums all numbers in a nested list",
    "checks whether two rectangles overlap", "calculates the distance between two points",
    "sorts a list of strings by length",
    "masks all but the last four digits of a card number",
    "counts the number of words that start with a capital letter",
    "converts a list of temperatures from Fahrenheit to Celsius",
    "finds the longest run of consecutive equal elements in a list",
)

CODE_LANGS: tuple[str, ...] = ("Python", "Python", "Python", "JavaScript", "JavaScript")

CODE_WRITE_PHRASINGS: tuple[str, ...] = (
    "Write a {lang} function that {t}.",
    "In {lang}, how would I write a function that {t}?",
    "Can you give me a short {lang} snippet that {t}?",
    "I need a {lang} function that {t}. Please include an example of calling it.",
    "Implement a function in {lang} that {t}.",
    "Show me how to write a {lang} function that {t}, with comments.",
    "Write {lang} code that {t}.",
    "Help me write a small {lang} function that {t}.",
    "What's a clean way to write a {lang} function that {t}?",
)

CODE_CONSTRAINTS: tuple[str, ...] = (
    "Keep it under 15 lines.",
    "Don't use any external libraries.",
    "Explain the time complexity.",
    "Handle empty input gracefully.",
    "Add a couple of test cases.",
    "Use clear variable names.",
    "Explain how it works in two sentences afterwards.",
    "Make it readable for a beginner.",
)

PYTHON_CONSTRAINTS: tuple[str, ...] = ("Add type hints.", "Include a docstring.")

SQL_TASKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("a table employees(id, name, department, salary, hire_date)", (
        "lists the three highest-paid employees",
        "shows the average salary in each department",
        "finds the employees hired in 2023",
        "counts how many employees work in each department",
        "finds departments with more than ten employees",
        "lists employees who earn more than the company average",
    )),
    ("tables orders(id, customer_id, order_date, total) and customers(id, name, city)", (
        "lists each customer's name with their total spending",
        "finds customers who have never placed an order",
        "shows the number of orders per month",
        "finds the five most recent orders with the customer's name",
        "ranks cities by total order value",
    )),
    ("a table books(id, title, author, year, genre)", (
        "lists all books published before 1950, sorted by year",
        "counts the books in each genre",
        "finds authors who have written more than three books",
        "finds the newest book in each genre",
    )),
    ("tables students(id, name, grade) and scores(student_id, subject, score)", (
        "finds the average score for each subject",
        "lists students who scored above 90 in math",
        "finds the top student in each subject",
        "shows each student's average score, highest first",
    )),
    ("a table products(id, name, category, price, stock)", (
        "finds the products that are out of stock",
        "raises the price of every product in the 'garden' category by 10 percent",
        "lists the cheapest product in each category",
        "shows the total stock value (price times stock) for each category",
    )),
    ("a table trips(id, rider_id, start_time, end_time, distance_km)", (
        "finds the average trip distance per day",
        "finds the longest trip for each rider",
        "counts the trips that lasted more than an hour",
    )),
    ("a table events(id, user_id, event_type, created_at)", (
        "counts the daily active users",
        "shows how many events of each type happened in the last seven days",
        "finds users whose first event was a 'signup' in the last week",
    )),
    ("a table rentals(id, movie_title, customer_name, rented_on, returned_on)", (
        "lists the rentals that have not been returned yet",
        "finds the five most rented movies",
        "finds customers who rented more than ten movies this year",
    )),
)

SQL_PHRASINGS: tuple[str, ...] = (
    "Given {schema}, write a SQL query that {t}.",
    "I have {schema}. How do I write a query that {t}?",
    "Write a SQL query that {t}. The database has {schema}.",
    "SQL question: with {schema}, what query {t}?",
    "Using {schema}, write a query that {t}, and explain each clause.",
)

SHELL_TASKS: tuple[str, ...] = (
    "count the lines in every .txt file in the current folder",
    "find all files larger than 100 MB in my home directory",
    "rename all .jpeg files in a folder to .jpg", "show the ten largest files in a directory",
    "search for the word 'error' in all log files, ignoring case",
    "delete files older than 30 days in a folder", "compress a folder into a .tar.gz archive",
    "extract a .tar.gz archive", "show the disk usage of each subfolder, sorted by size",
    "find which process is using port 8080", "list the 20 most recently modified files",
    "count how many unique IP addresses appear in an access log",
    "replace 'foo' with 'bar' in every .py file",
    "show the last 50 lines of a log file and keep following it",
    "make a backup copy of a file with today's date in its name",
    "check how much free memory the machine has", "print the first column of a CSV file",
    "sort a file's lines and remove duplicates",
    "run a script every day at 7 a.m. with cron", "make a script executable",
    "find all empty directories", "print the number of files in each subdirectory",
    "rerun a command every two seconds and watch its output",
    "list all environment variables that contain 'PATH'", "stop a process by its PID",
    "check whether a website is reachable", "copy a folder to another machine over SSH",
    "count the words in a text file", "show the current git branch and its status",
    "convert all filenames in a folder to lowercase",
    "print the name and line count of every .csv file",
    "measure how long a command takes to run", "find duplicate lines in a file",
    "split a large file into 100 MB pieces", "show which shell I am using",
)

SHELL_PHRASINGS: tuple[str, ...] = (
    "Write a shell command to {t}.",
    "How do I {t} from the Linux command line?",
    "Give me a bash one-liner to {t}.",
    "What's the terminal command to {t}?",
    "In bash, how can I {t}? Please explain each part of the command.",
    "I'm on a Mac terminal. How do I {t}?",
)

BUGGY_SNIPPETS: tuple[Snippet, ...] = (
    Snippet("python", """
        def average(nums):
            return sum(nums) / len(nums)
        """, "compute the average of a list", "it crashes when the list is empty"),
    Snippet("python", """
        def add_item(item, items=[]):
            items.append(item)
            return items
        """, "add an item to a new list", "items from earlier calls keep showing up"),
    Snippet("python", """
        for i in range(1, 10):
            print(i)
        """, "print the numbers 1 to 10", "it stops at 9"),
    Snippet("python", """
        nums = [2, 4, 5, 6, 8, 9]
        for n in nums:
            if n % 2 == 0:
                nums.remove(n)
        print(nums)
        """, "remove all even numbers from a list", "some even numbers are left behind"),
    Snippet("python", """
        age = 30
        print("You are " + age + " years old")
        """, "print a message with the user's age", "it raises a TypeError"),
    Snippet("python", """
        answer = input("Continue? ")
        if answer is "yes":
            print("Continuing")
        """, "check whether the user typed yes", "it sometimes fails even when I type yes"),
    Snippet("python", """
        def factorial(n):
            return n * factorial(n - 1)
        """, "compute a factorial", "it never stops and hits a RecursionError"),
    Snippet("python", """
        def word_count(text):
            return len(text.split(" "))
        """, "count the words in a sentence", "the count is too high when there are double spaces"),
    Snippet("python", """
        def count_lines(path):
            f = open(path)
            content = f.read()
            lines = f.readlines()
            return len(lines)
        """, "count the lines in a file", "it always returns 0"),
    Snippet("python", """
        def letter_counts(word):
            counts = {}
            for ch in word:
                counts[ch] += 1
            return counts
        """, "count how often each letter appears", "it raises a KeyError"),
    Snippet("python", """
        def largest(nums):
            best = 0
            for n in nums:
                if n > best:
                    best = n
            return best
        """, "find the largest number in a list", "it returns 0 for a list of negative numbers"),
    Snippet("python", """
        def is_prime(n):
            for i in range(2, n // 2):
                if n % i == 0:
                    return False
            return True
        """, "check whether a number is prime", "it says that 1 and 4 are prime"),
    Snippet("python", """
        def total(nums):
            s = 0
            for n in nums:
                s += n
                return s
        """, "add up a list of numbers", "it only returns the first number"),
    Snippet("python", """
        a = input("First number: ")
        b = input("Second number: ")
        print(a + b)
        """, "add two numbers typed by the user", "for 2 and 3 it prints 23 instead of 5"),
    Snippet("python", """
        class Account:
            def __init__(self):
                self.balance = 0

            def deposit(amount):
                self.balance += amount
        """, "keep track of a bank balance", "calling deposit raises a TypeError"),
    Snippet("python", """
        count = 0

        def click():
            count += 1
            return count
        """, "count how many times a button is clicked", "it raises UnboundLocalError"),
    Snippet("python", """
        total = 0
        with open("numbers.txt") as f:
            for line in f:
                total += line
        print(total)
        """, "add up the numbers in a file, one per line", "it raises a TypeError"),
    Snippet("python", """
        names = ["Ana", "Ben", "Cy"]
        for i, name in enumerate(names):
            print(i, name)
        """, "print each name with its position starting from 1", "the numbering starts at 0"),
    Snippet("python", """
        original = [1, 2, 3]
        copy = original
        copy.append(4)
        print(original)
        """, "make a copy of a list and change only the copy", "the original list changes too"),
    Snippet("python", """
        def get_discount(price):
            if price > 100:
                discount = 0.1
            return price * discount
        """, "apply a 10% discount to prices over 100", "it crashes for cheaper items"),
    Snippet("javascript", """
        function isAdmin(user) {
          if (user.role = "admin") {
            return true;
          }
          return false;
        }
        """, "check whether a user is an admin", "every user is treated as an admin"),
    Snippet("javascript", """
        for (var i = 0; i < 3; i++) {
          setTimeout(() => console.log(i), 100);
        }
        """, "print 0, 1 and 2 after a short delay", "it prints 3 three times"),
    Snippet("javascript", """
        const doubled = [1, 2, 3].map(n => { n * 2 });
        console.log(doubled);
        """, "double every number in an array", "the result is full of undefined"),
    Snippet("javascript", """
        const nums = [5, 10, 1, 9];
        nums.sort();
        console.log(nums);
        """, "sort an array of numbers", "10 comes before 5 and 9"),
    Snippet("javascript", """
        async function getUser() {
          const res = await fetch("/api/user");
          return res.json();
        }
        const user = getUser();
        console.log(user.name);
        """, "load a user from an API and print the name", "it prints undefined"),
    Snippet("javascript", """
        const price = document.getElementById("price").value;
        const total = price + 5;
        console.log(total);
        """, "add a fee of 5 to a price typed into a form", "for 100 it shows 1005"),
    Snippet("javascript", """
        const timer = {
          seconds: 0,
          start() {
            setInterval(function () {
              this.seconds++;
            }, 1000);
          },
        };
        """, "count seconds in a timer object", "timer.seconds never goes up"),
    Snippet("javascript", """
        const items = ["a", "b", "c"];
        for (let i = 0; i <= items.length; i++) {
          console.log(items[i]);
        }
        """, "print every item in an array", "it prints undefined at the end"),
    Snippet("javascript", """
        const list = [];
        if (list) {
          console.log("not empty");
        } else {
          console.log("empty");
        }
        """, "check whether an array is empty", "it always says the array is not empty"),
    Snippet("javascript", """
        const a = [1, 2];
        const b = [1, 2];
        console.log(a === b ? "same" : "different");
        """, "compare two arrays", "it says [1, 2] and [1, 2] are different"),
    Snippet("sql", """
        SELECT name FROM customers WHERE email = NULL;
        """, "find customers without an email", "it returns no rows, though some have no email"),
    Snippet("sql", """
        SELECT customer_id, COUNT(*) FROM orders;
        """, "count the orders for each customer", "the database complains about GROUP BY"),
    Snippet("sql", """
        SELECT department, AVG(salary)
        FROM employees
        WHERE AVG(salary) > 50000
        GROUP BY department;
        """, "list departments with an average salary above 50000", "the query is rejected"),
    Snippet("bash", """
        for f in $(ls *.txt); do
          wc -l $f
        done
        """, "count lines in every .txt file", "files with spaces in their names break"),
    Snippet("bash", """
        name = "Ada"
        echo "Hello $name"
        """, "set a variable and print it", "it says 'name: command not found'"),
    Snippet("bash", """
        if [ $count > 10 ]; then
          echo "big"
        fi
        """, "check whether a number is greater than 10", "it creates a file called 10"),
)

EXPLAIN_SNIPPETS: tuple[Snippet, ...] = (
    Snippet("python", """
        squares = [x * x for x in range(10) if x % 2 == 0]
        """),
    Snippet("python", """
        word_lengths = {word: len(word) for word in words}
        """),
    Snippet("python", """
        from collections import Counter

        counts = Counter("mississippi")
        print(counts.most_common(2))
        """),
    Snippet("python", """
        with open("data.txt") as f:
            lines = [line.strip() for line in f if line.strip()]
        """),
    Snippet("python", """
        people.sort(key=lambda p: (p["age"], p["name"]))
        """),
    Snippet("python", """
        import time

        def timed(func):
            def wrapper(*args, **kwargs):
                start = time.perf_counter()
                result = func(*args, **kwargs)
                print(f"{func.__name__} took {time.perf_counter() - start:.3f}s")
                return result
            return wrapper
        """),
    Snippet("python", """
        def countdown(n):
            while n > 0:
                yield n
                n -= 1
        """),
    Snippet("python", """
        a, b = b, a
        """),
    Snippet("python", """
        try:
            age = int(input("Age: "))
        except ValueError:
            print("Please enter a number.")
        """),
    Snippet("python", """
        if __name__ == "__main__":
            main()
        """),
    Snippet("python", """
        for name, score in zip(names, scores):
            print(f"{name}: {score}")
        """),
    Snippet("python", """
        from dataclasses import dataclass

        @dataclass
        class Point:
            x: float
            y: float

            def norm(self) -> float:
                return (self.x ** 2 + self.y ** 2) ** 0.5
        """),
    Snippet("python", """
        def is_palindrome(s):
            s = s.lower()
            return s == s[::-1]
        """),
    Snippet("python", """
        unique_sorted = sorted(set(nums))
        """),
    Snippet("python", """
        has_negative = any(n < 0 for n in nums)
        all_small = all(n < 100 for n in nums)
        """),
    Snippet("python", """
        def total(*numbers):
            return sum(numbers)
        """),
    Snippet("python", """
        from functools import lru_cache

        @lru_cache(maxsize=None)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        """),
    Snippet("python", """
        config = {**defaults, **user_settings}
        port = config.get("port", 8080)
        """),
    Snippet("javascript", """
        const evens = nums.filter(n => n % 2 === 0).map(n => n * 10);
        """),
    Snippet("javascript", """
        const total = cart.reduce((sum, item) => sum + item.price * item.qty, 0);
        """),
    Snippet("javascript", """
        const { name, age = 18 } = user;
        """),
    Snippet("javascript", """
        const merged = { ...defaults, ...options };
        """),
    Snippet("javascript", """
        fetch("/api/items")
          .then(res => res.json())
          .then(items => console.log(items.length))
          .catch(err => console.error(err));
        """),
    Snippet("javascript", """
        document.querySelector("#btn").addEventListener("click", () => {
          document.body.classList.toggle("dark");
        });
        """),
    Snippet("javascript", """
        function makeCounter() {
          let count = 0;
          return () => ++count;
        }
        const next = makeCounter();
        """),
    Snippet("javascript", """
        const city = user?.address?.city ?? "unknown";
        """),
    Snippet("sql", """
        SELECT department, COUNT(*) AS n
        FROM employees
        GROUP BY department
        HAVING COUNT(*) > 5
        ORDER BY n DESC;
        """),
    Snippet("sql", """
        SELECT c.name
        FROM customers c
        LEFT JOIN orders o ON o.customer_id = c.id
        WHERE o.id IS NULL;
        """),
    Snippet("sql", """
        SELECT name, salary, RANK() OVER (ORDER BY salary DESC) AS salary_rank
        FROM employees;
        """),
    Snippet("bash", """
        grep -i "error" app.log | sort | uniq -c | sort -rn | head -5
        """),
    Snippet("bash", """
        find . -name "*.tmp" -mtime +7 -delete
        """),
    Snippet("bash", """
        tar -czf backup.tar.gz ~/documents
        """),
    Snippet("bash", """
        du -sh * | sort -h
        """),
    Snippet("bash", """
        for f in *.png; do
          convert "$f" "${f%.png}.jpg"
        done
        """),
    Snippet("bash", """
        awk -F, '{ sum += $3 } END { print sum }' sales.csv
        """),
)

LANG_NAMES: dict[str, str] = {
    "python": "Python", "javascript": "JavaScript", "sql": "SQL", "bash": "shell",
}

CODE_FIX_PHRASINGS: tuple[str, ...] = (
    "This {lang} code is supposed to {goal}, but {symptom}. Can you fix it?\n\n{code}",
    "Why doesn't this work? It should {goal}, but {symptom}.\n\n{code}",
    "I'm trying to {goal} in {lang}, but {symptom}. What's wrong?\n\n{code}",
    "Find the bug in this {lang} snippet. It's meant to {goal}.\n\n{code}",
    "{code}\n\nThis should {goal}, but {symptom}. Please explain the bug and show the fix.",
    "Debug this for me: the code should {goal}, but {symptom}.\n\n{code}",
    "Can you review this {lang} code? It's supposed to {goal}.\n\n{code}",
)

CODE_EXPLAIN_PHRASINGS: tuple[str, ...] = (
    "What does this {lang} code do?\n\n{code}",
    "Explain this snippet line by line:\n\n{code}",
    "Can you walk me through what this code does?\n\n{code}",
    "I found this in a project and don't understand it. What does it do?\n\n{code}",
    "Explain this {lang} code to a beginner:\n\n{code}",
    "{code}\n\nWhat is this doing, and when would I use it?",
    "Briefly, what does the following {lang} do?\n\n{code}",
    "Describe in plain English what this code does:\n\n{code}",
)

PROGRAMMING_QUESTIONS: tuple[str, ...] = (
    "In Python, what is the difference between a list and a tuple?",
    "What does the 'self' parameter mean in Python classes?",
    "When should I use a dictionary instead of a list in Python?",
    "What is the difference between == and === in JavaScript?",
    "What is a closure in JavaScript? Show a short example.",
    "How do list comprehensions work in Python?",
    "What is the difference between let, const and var in JavaScript?",
    "What do async and await do in JavaScript?",
    "When should I use a for loop and when a while loop?",
    "How do I read a file line by line in Python?",
    "What is a SQL JOIN, and what kinds are there?",
    "What is the difference between WHERE and HAVING in SQL?",
    "What does the Python 'with' statement do?",
    "What is a virtual environment in Python, and why should I use one?",
    "How do I handle exceptions in Python?",
    "What is the difference between null and undefined in JavaScript?",
    "What are Python decorators? Give a simple example.",
    "How do I make an HTTP request in JavaScript using fetch?",
    "What does git rebase do compared to git merge?",
    "What is the difference between a shallow copy and a deep copy?",
    "What is recursion? Show a small example in Python.",
    "Why are mutable default arguments a common bug in Python?",
    "What is the difference between 'is' and '==' in Python?",
    "How do I sort a dictionary by its values in Python?",
    "What does the map method do on JavaScript arrays?",
    "What is the difference between map, filter and reduce?",
    "What is a database index, and when should I add one?",
    "What does chmod 755 mean in Linux?",
    "What is the difference between stdout and stderr?",
    "How do pipes work in the shell?",
    "What is JSON, and how do I parse it in Python?",
    "What is a race condition?",
    "What is the difference between a process and a thread?",
    "What are type hints in Python, and do they affect how code runs?",
    "How does the 'this' keyword work in JavaScript?",
    "What is an f-string in Python?",
    "What is a primary key in SQL?",
    "What is the difference between GET and POST requests?",
    "What is a generator in Python?",
    "How can I remove items from a list safely while looping over it?",
    "What is the purpose of a .gitignore file?",
    "What does export do in a bash shell?",
    "What is the difference between a module and a package in Python?",
    "How do I write a unit test in Python with pytest?",
)

# ---------------------------------------------------------------------------------------
# rewrite
# ---------------------------------------------------------------------------------------

CASUAL_SENTENCES: tuple[str, ...] = (
    "hey, can u send me the report by tmrw? thx",
    "sorry i'm late, the bus was a total mess today",
    "we gotta push the meeting, something came up",
    "the new app is kinda buggy but it works i guess",
    "can't make it friday, maybe next week?",
    "just checking if you got my last email lol",
    "the boss wants the numbers asap",
    "thx for the help yesterday, you're a lifesaver",
    "our wifi is down again, ugh",
    "gonna need a few more days to finish this",
    "the client loved it!! great job everyone",
    "no worries, we can sort it out later",
    "btw the printer's broken again",
    "i think the price is way too high tbh",
    "let's grab lunch and talk about the project",
    "can you take a look at this when you get a sec?",
    "heads up: the office is closed monday",
    "the shipment's stuck somewhere, no idea when it'll show up",
    "i'm totally swamped this week, can someone else do it?",
    "that presentation was awesome, loved the charts",
    "we messed up the order, our bad",
    "send me the slides whenever, no rush",
    "don't forget the team thing on thursday",
    "i need a day off, my kid's sick",
    "the numbers look kinda off to me",
    "quick q: who's in charge of the budget now?",
    "yeah that works for me, see you then",
    "pls fill out the form before friday",
    "our sales were way up last month, nice!",
    "i'll ping you when it's done",
    "the website looks super outdated",
    "my laptop died so i'll be a bit late",
    "can we move the call to like 3ish?",
    "got your invoice, will pay it next week",
    "the new hire starts monday, be nice lol",
)

BLUNT_SENTENCES: tuple[str, ...] = (
    "Send me the file now.", "Your report is full of mistakes.",
    "Stop calling me during lunch.", "I don't have time for this meeting.",
    "Move your car, it's blocking my driveway.", "This is not what I ordered.",
    "You forgot to reply to my email again.", "Turn the music down.",
    "Your idea won't work.", "I need the money you owe me by Friday.",
    "Fix this bug today.", "Don't touch the things on my desk.",
    "The food was cold and the service was slow.", "You're late again.",
    "I want a refund.", "Clean up the kitchen after you use it.",
    "Your presentation was too long.", "Answer my question.",
    "We are not paying for that.", "Stop interrupting me in meetings.",
    "Your dog keeps barking at night.", "Give me an update on the project.",
    "That's a bad plan.", "I won't be working this weekend.",
    "Stop sending me these emails.", "You need to work faster.",
)

COMPLEX_SENTENCES: tuple[str, ...] = (
    "The municipality has initiated a comprehensive review of its waste management "
    "protocols in order to enhance operational efficiency.",
    "Due to unforeseen circumstances beyond our control, the scheduled event has been "
    "postponed indefinitely.",
    "Photosynthesis is the process by which chlorophyll-containing organisms convert light "
    "energy into chemical energy stored in glucose.",
    "The applicant must furnish documentation substantiating their eligibility prior to the "
    "commencement of the program.",
    "Regular physical activity is associated with a reduced incidence of cardiovascular "
    "disease and improved psychological well-being.",
    "Notwithstanding the aforementioned concerns, the committee elected to proceed with the "
    "proposal.",
    "The implementation of the new software necessitated extensive retraining of personnel "
    "across multiple departments.",
    "Consumption of adequate quantities of water is essential for the maintenance of optimal "
    "bodily function.",
    "The tenant is obligated to remit payment on or before the first day of each calendar "
    "month.",
    "In light of declining enrollment, the institution is contemplating the consolidation of "
    "several academic departments.",
    "Precipitation is anticipated to intensify throughout the afternoon, accompanied by "
    "gusts of considerable strength.",
    "The research demonstrates a statistically significant correlation between sleep "
    "duration and academic performance.",
    "Customers are advised that the facility will be inaccessible for the duration of the "
    "renovation.",
    "The vehicle's fuel efficiency is contingent upon driving behavior, tire pressure and "
    "the frequency of maintenance.",
    "Individuals who wish to participate are encouraged to register at their earliest "
    "convenience.",
    "The novel explores the multifaceted relationship between memory, identity and the "
    "passage of time.",
    "Excessive exposure to ultraviolet radiation may result in premature aging of the skin.",
    "The organization endeavors to foster an inclusive environment in which all members "
    "feel valued.",
    "The aforementioned product has been discontinued owing to insufficient consumer demand.",
    "Adherence to the prescribed dosage is imperative to ensure the efficacy of the "
    "medication.",
    "Migratory species frequently traverse vast distances in pursuit of favorable climatic "
    "conditions.",
    "The proliferation of smartphones has fundamentally transformed patterns of social "
    "interaction.",
    "Participants exhibited a marked preference for the modified version of the interface.",
    "The bridge's structural integrity was compromised as a consequence of prolonged "
    "corrosion.",
    "Further information may be obtained by contacting the administrative office during "
    "regular business hours.",
    "The committee has determined that additional deliberation is required before a "
    "resolution can be reached.",
    "Our analysis indicates that the majority of respondents remain ambivalent regarding the "
    "proposed changes.",
    "Insufficient illumination in the workspace may contribute to ocular fatigue.",
    "Children must be supervised at all times in the vicinity of the swimming pool.",
    "The establishment reserves the right to refuse service to patrons who fail to comply "
    "with the dress code.",
)

WORDY_SENTENCES: tuple[str, ...] = (
    "At this point in time, we are currently in the process of reviewing all of the "
    "applications that we have received so far.",
    "I just wanted to take a moment to reach out and say that I really appreciate all of the "
    "help that you gave me.",
    "Due to the fact that it was raining very heavily outside, we made the decision to cancel "
    "the picnic that we had planned.",
    "In my personal opinion, I think that the new design is much better and more attractive "
    "than the old design was.",
    "The reason why I am writing this email to you today is to ask whether you might possibly "
    "be available to meet next week.",
    "It is absolutely essential and extremely important that everyone arrives on time for "
    "the meeting tomorrow morning.",
    "We would like to take this opportunity to inform all of our valued customers that our "
    "store will be closed on Monday.",
    "In the event that you have any questions or concerns at all, please do not hesitate to "
    "get in touch with us.",
    "The book, which was written by a famous author who is well known, tells a story about a "
    "young girl who lives on a farm.",
    "He walked slowly and carefully across the old wooden bridge, which was very narrow and "
    "looked as if it might break.",
    "Despite the fact that she was very tired after a long day at work, she still went to "
    "the gym in the evening.",
    "There are many different kinds of various birds that can be seen in the park during the "
    "spring months of the year.",
    "Our company is a company that makes furniture, and the furniture that we make is made "
    "from wood that is recycled.",
    "I am of the opinion that we should probably think about possibly changing the schedule "
    "for the project.",
    "For the purpose of saving money, we have decided that we will stop ordering paper cups "
    "for the office kitchen.",
    "The meeting that was scheduled to take place on Thursday has been moved and will now "
    "take place on Friday instead.",
    "It goes without saying that the safety of our employees is the most important thing "
    "and our top priority.",
    "She has a tendency to forget things quite often, so she writes everything down in a "
    "small notebook that she carries.",
    "As a matter of fact, the train was actually late by approximately twenty minutes or so "
    "this morning.",
    "The report, which is long and contains many pages, needs to be read by all team members "
    "before the next meeting.",
    "We are writing to let you know that your order has been shipped and should arrive at "
    "your address within a few days.",
    "In spite of the fact that the restaurant was very busy, the waiter was extremely "
    "friendly and helpful to us.",
    "The purpose of this document is to provide a description of the steps that are needed "
    "to install the software.",
    "Many people hold the belief that drinking a glass of water first thing in the morning "
    "is good for their health.",
    "The weather today is going to be sunny and warm for most of the day, with only a small "
    "chance of rain later in the afternoon.",
    "I would like to ask you if it would be at all possible for you to send me a copy of the "
    "contract at some point.",
)

ERROR_SENTENCES: tuple[str, ...] = (
    "Me and him goes to the store every saturday.", "She don't like coffee, she prefer tea.",
    "Their going to the beach tomorrow if it dont rain.",
    "I has been working here since three years.",
    "The childrens was playing in the park all afternoon.", "Can you borrow me your pen?",
    "He walk to school everyday with his sister.", "Its a beautiful day, lets go outside.",
    "We was very happy to seen you at the party.", "The team have finish the project last week.",
    "I seen that movie before, it were really good.", "Your the best friend i ever had.",
    "She is more taller than her brother.", "There is many reasons to learn a new language.",
    "He don't know nothing about cars.", "Who's book is this on the table?",
    "I am agree with you about the plan.", "The informations you gave me was very useful.",
    "Everyone have their own opinion.", "We discussed about the problem for hours.",
    "I'm looking forward to meet you next week.", "The dog wagged it's tail happily.",
    "If I would have known, I would have came earlier.",
    "She explained me the rules of the game.",
    "They was late because there car broke down.",
    "Less people came to the event then we expected.",
    "Between you and I, the plan is not very good.",
    "I has finished my homework, can I play now?",
    "The book who I read last week was amazing.", "He suggested me to take the train.",
    "My sister and me are going to visit our grandma.",
    "The weather were terrible, so we stayed inside.",
    "I didn't went to work yesterday because I was sick.",
    "Each of the students have a different schedule.", "Where you are going this weekend?",
    "She can sings very well.", "We goes to the gym three times in a week.",
    "This is the most easiest question on the test.", "i think that we should of left earlier",
    "Him and his friends plays football after school.",
    "The news are very surprising today.", "I am living here since 2019.",
)

PASSIVE_SENTENCES: tuple[str, ...] = (
    "The cake was eaten by the children before the party started.",
    "The report was written by three students over the summer.",
    "Mistakes were made in the planning of the event.",
    "The window was broken by a ball during the game.",
    "The new policy was announced by the manager on Monday.",
    "The decision was made by the committee after a long discussion.",
    "The old bridge was replaced by the city last year.",
    "The package was delivered to the wrong address by the courier.",
    "The meeting room was booked by someone else.",
    "The song was performed by a local choir.",
    "The garden is looked after by volunteers every weekend.",
    "The letter was signed by all twelve members of the club.",
    "The film was watched by millions of people in its first week.",
    "The experiment was repeated by another team of scientists.",
    "The cookies were baked by my grandmother.",
    "The road was blocked by a fallen tree.",
)

ANNOUNCEMENT_SENTENCES: tuple[str, ...] = (
    "The library will extend its opening hours during exam season.",
    "Our new coffee shop opens on Saturday at 8 a.m.",
    "The company released a new version of its app yesterday.",
    "The museum offers free entry on the first Sunday of every month.",
    "The city plans to plant 5,000 new trees by next year.",
    "Our team won the regional football tournament.",
    "The hiking trail will be closed for repairs until June.",
    "The school is looking for volunteers to help with the book fair.",
    "A new bakery has opened next to the train station.",
    "The concert was postponed because of the storm.",
    "We are raising money to repair the community pool.",
    "The bus to the airport leaves every thirty minutes.",
    "Our store is having a sale on winter jackets.",
    "The park has a new playground for young children.",
    "The workshop teaches basic photography skills.",
    "I finished my first painting last weekend.",
    "The restaurant serves breakfast all day.",
    "The festival will feature music from ten local bands.",
    "Our neighbor grows tomatoes in her garden.",
    "The train was delayed by an hour.",
    "Registration for the summer swim classes opens next week.",
    "The farmers' market moves to the town square in May.",
)

REWRITE_FORMAL: tuple[str, ...] = (
    'Rewrite this message in a professional tone: "{s}"',
    "Make this more formal:\n\n{s}",
    'How would I say this in a formal email? "{s}"',
    "Turn this casual note into polite, professional English: {s}",
    'Rewrite the following so I can send it to my manager: "{s}"',
    "Please rephrase this formally: {s}",
)
REWRITE_POLITE: tuple[str, ...] = (
    'Rewrite this to sound more polite: "{s}"',
    'How can I say this more kindly? "{s}"',
    "Make this sentence friendlier without changing its meaning: {s}",
    'Soften this message: "{s}"',
    "Rephrase this so it doesn't sound rude: {s}",
    'I want to tell someone this, but nicely: "{s}"',
)
REWRITE_SIMPLE: tuple[str, ...] = (
    'Rewrite this sentence in simple English: "{s}"',
    "Make this easier to understand: {s}",
    'Simplify this for a 10-year-old: "{s}"',
    "Say this in plain language: {s}",
    'Can you rewrite this without the jargon? "{s}"',
    "Rewrite this using short, everyday words: {s}",
)
REWRITE_SHORT: tuple[str, ...] = (
    'Make this sentence shorter: "{s}"',
    "Cut the unnecessary words from this sentence: {s}",
    'Rewrite this more concisely: "{s}"',
    "Shorten this to under 15 words: {s}",
    'Tighten up this sentence: "{s}"',
    "Edit this to be clear and brief: {s}",
)
REWRITE_GRAMMAR: tuple[str, ...] = (
    'Fix the grammar in this sentence: "{s}"',
    "Correct any mistakes: {s}",
    'Can you proofread this? "{s}"',
    'What is wrong with this sentence, and how should it be written? "{s}"',
    "Please correct the grammar and spelling: {s}",
    'Fix this sentence and explain what you changed: "{s}"',
)
REWRITE_ACTIVE: tuple[str, ...] = (
    'Rewrite this sentence in the active voice: "{s}"',
    "Change this from passive to active voice: {s}",
    'Make this sentence more direct by using the active voice: "{s}"',
)
REWRITE_STYLE: tuple[str, ...] = (
    'Rewrite this as an exciting announcement: "{s}"',
    "Turn this into a short social media post: {s}",
    'Write this as a catchy newspaper headline: "{s}"',
    "Make this sound more enthusiastic: {s}",
    'Rewrite this sentence in a more descriptive way: "{s}"',
    'Give me three different ways to say this: "{s}"',
    "Rewrite this for a children's newsletter: {s}",
    'Rewrite this as a friendly reminder: "{s}"',
)
REWRITE_PARAGRAPH: tuple[str, ...] = (
    "Rewrite this paragraph as a bulleted list of key facts:\n\n{p}",
    "Rewrite the following paragraph so a 10-year-old could understand it:\n\n{p}",
    "Make this paragraph more formal:\n\n{p}",
    "Rewrite this paragraph in fewer than 50 words:\n\n{p}",
    "Turn this paragraph into a short, friendly blog introduction:\n\n{p}",
    "Paraphrase this paragraph using different words:\n\n{p}",
    "Convert this paragraph into a numbered list:\n\n{p}",
    "Rewrite this paragraph in a more lively, engaging style:\n\n{p}",
    "{p}\n\nRewrite the text above in simpler language.",
    "{p}\n\nCan you rewrite this as a short news item with a headline?",
)
REWRITE_EXTRAS: tuple[str, ...] = (
    "Keep the meaning the same.",
    "Give me two options.",
    "Explain your changes briefly.",
    "Only return the rewritten version.",
)

# ---------------------------------------------------------------------------------------
# list
# ---------------------------------------------------------------------------------------

LIST_TOPICS: tuple[str, ...] = (
    "ways to save money on groceries", "fruits that are high in vitamin C",
    "board games for two players", "questions to ask at the end of a job interview",
    "healthy snacks for work", "indoor plants that are hard to kill",
    "hobbies you can start for free", "famous inventors and what they invented",
    "countries in South America", "ideas for a rainy afternoon with kids",
    "tips for better sleep", "classic novels worth reading",
    "ways to reduce plastic waste at home", "good study habits",
    "ingredients for a basic pantry", "names for a pet turtle",
    "ways to stay focused while studying", "things to pack for a beach trip",
    "birthday gift ideas for someone who loves cooking", "breakfast ideas without eggs",
    "uses for baking soda", "exercises you can do without equipment",
    "ways to make a small apartment feel bigger", "conversation starters for a party",
    "programming languages and what they are used for", "tips for writing clear emails",
    "vegetables that grow well in pots", "animals that live in the Arctic",
    "ways to be more productive in the morning", "easy dinner recipes for beginners",
    "signs that a plant needs more water", "things to do on a long flight",
    "skills every adult should learn", "fun facts about octopuses",
    "ways to show appreciation to a coworker", "ideas for a school science fair project",
    "free things to do in a big city", "tips for a first-time camper", "podcast topic ideas",
    "ways to practice a new language every day", "musical instruments that are easy to learn",
    "common mistakes new drivers make", "ideas for a themed dinner party",
    "reasons to learn to cook", "kitchen tools every beginner needs",
    "ways to reuse glass jars", "spices that go well with roasted potatoes",
    "things to check before buying a used car", "good questions to ask a new friend",
    "ways to cool down a room without air conditioning", "birds often seen in city parks",
    "tips for saving energy at home", "ways to relax after a stressful day",
    "rainy day activities for adults", "reasons people keep journals",
    "famous landmarks in Europe", "ideas for a short story plot", "words that rhyme with 'light'",
    "synonyms for 'happy'", "team-building activities for a small office",
    "ways to make studying more fun", "features to look for in a laptop",
    "ways to keep a dog entertained indoors", "snacks for a movie night",
    "desserts that don't need an oven", "tips for public speaking",
    "mistakes to avoid when learning to code", "things that make a website easy to use",
    "simple science experiments for kids", "classic card games", "low-cost date ideas",
    "stretches for people who sit all day", "soups for cold weather",
    "things to do when you can't sleep", "items for a basic first aid kit",
    "ways to help a friend who is feeling down", "tips for looking after a new puppy",
    "facts about the Moon", "ways to celebrate a small win",
    "creative uses for old T-shirts", "benefits of walking every day",
    "fruits that grow in tropical climates", "ways to get better at chess",
    "tips for packing light", "cheap ways to decorate a bedroom", "types of clouds",
    "types of renewable energy", "types of bridges", "pasta shapes", "cheeses from France",
    "herbs you can grow on a windowsill", "dog breeds suited to apartments",
    "careers that involve working outdoors", "jobs that use a lot of math",
    "skills that help in any job", "ideas for a family game night", "road trip games",
    "things to write in a birthday card", "polite ways to decline an invitation",
    "questions to ask before adopting a pet", "ways to make a long commute enjoyable",
    "strategies for remembering names", "topics for a school debate",
    "ideas for a weekend project at home", "foods that are rich in protein",
    "foods that are rich in fiber", "drinks to try instead of soda", "winter sports",
    "summer activities for teenagers", "ways to practice gratitude",
    "examples of simple machines", "famous paintings and who painted them",
    "famous scientists and their discoveries", "ancient civilizations",
    "inventions that changed everyday life", "English words borrowed from other languages",
    "idioms about time", "proverbs about patience", "ways to reduce food waste",
    "uses for leftover rice", "toppings for a baked potato", "sandwich ideas for lunch",
    "dishes to bring to a potluck", "reasons to visit a library", "ways to improve a resume",
    "ways to stay safe while hiking", "tips for working from home", "easy magic tricks",
    "ways to teach kids about money", "things to consider when choosing a college",
    "quick warm-up exercises", "mindfulness exercises",
    "ways to make coffee without a coffee machine", "qualities of a good leader",
    "qualities of a good friend", "ideas for reducing screen time", "ocean animals",
    "desert animals", "nocturnal animals", "insects that help gardens",
    "flowers that attract bees", "trees with bright autumn colors",
    "fun things to do in the snow", "tips for cooking for a large group",
    "ways to cut down on sugar", "things to do the night before a job interview",
    "reasons to learn history", "breads from around the world",
    "street foods from around the world", "festivals celebrated around the world",
    "inventions from ancient China", "ways to organize a bookshelf",
    "common houseplant pests", "essential camping gear", "tips for a first apartment",
    "hobbies that involve writing", "outdoor games for kids", "ways to keep your brain sharp",
    "reasons people enjoy gardening", "ideas for a personal blog", "famous bridges",
    "planets in the solar system and one fact about each", "ways to use up ripe bananas",
    "things to bring on a day hike", "questions to ask a doctor at a checkup",
    "ways to make a meeting shorter", "good habits for a healthy back",
    "fun ways to learn math", "animals that hibernate", "colors of the rainbow",
    "things that float in water", "tips for taking care of a bicycle",
    "traditions for the first day of spring", "ways to welcome a new neighbor",
    "ideas for a class party", "plants that can grow in shade",
)

LIST_PHRASINGS: tuple[str, ...] = (
    "List {n} {t}.",
    "Give me {n} {t}.",
    "What are {n} {t}?",
    "Can you name {n} {t}?",
    "I need {n} {t}. Go!",
    "Make a list of {n} {t}, with one sentence about each.",
    "Suggest {n} {t}.",
    "Brainstorm {n} {t}.",
    "Could you write a quick list of {n} {t}?",
    "Name {n} {t}, please.",
    "Give me a bulleted list of {n} {t}.",
    "Help me come up with {n} {t}.",
)

LIST_CONSTRAINTS: tuple[str, ...] = (
    "Number them.",
    "Keep each item to one line.",
    "Add a short explanation for each.",
    "No explanations, just the list.",
    "Use bullet points.",
    "Put the most useful one first.",
    "Avoid the most obvious answers.",
    "Make them suitable for kids.",
)

CITY_LIST_TOPICS: tuple[str, ...] = (
    "things to do in {x}", "foods to try in {x}", "free activities in {x}",
    "day trips from {x}", "things to know before visiting {x}",
)
COUNTRY_LIST_TOPICS: tuple[str, ...] = (
    "traditional dishes from {x}", "interesting facts about {x}",
    "famous places to visit in {x}", "words or phrases a visitor to {x} might find useful",
)
JOB_LIST_TOPICS: tuple[str, ...] = (
    "skills {ax} needs", "tools {ax} uses every day", "questions to ask {ax} about the job",
)
HOBBY_LIST_TOPICS: tuple[str, ...] = (
    "reasons to try {x}", "things a beginner needs for {x}", "common beginner mistakes in {x}",
)

# ---------------------------------------------------------------------------------------
# chat
# ---------------------------------------------------------------------------------------

SMALL_TALK: tuple[str, ...] = (
    "Hi! How are you doing today?", "Good morning! What's a good way to start the day?",
    "Tell me something interesting I probably don't know.",
    "I'm bored. Can you entertain me for a minute?", "What's a fun fact about space?",
    "Can you tell me a joke?", "Tell me a clean joke about cats.",
    "Do you have a favorite word? Mine is 'serendipity'.",
    "Hey there! Can we just chat for a bit?",
    "It's raining all day here. How should I spend the afternoon?",
    "What makes a day a good day, in your view?",
    "I can't decide what to have for dinner. Help!",
    "What's something small that can make someone's day better?",
    "Tell me a short story about a brave snail.",
    "Say something encouraging, please. It's been a long week.",
    "What would be a fun question to ask my friends at dinner tonight?",
    "Let's play a word game. You start.", "Give me a riddle to solve.",
    "What's the best way to spend a Sunday?",
    "I just woke up from a nap and feel groggy. Any tips?",
    "What's a good way to celebrate finishing my exams?",
    "Tell me about an animal with a surprising talent.",
    "If you were a color, which one would you be and why?",
    "What's a fun thing I could learn in five minutes?",
    "What do you think makes a good friend?",
    "Is it better to be a morning person or a night owl?",
    "I'm making tea. Tell me something nice while I wait.",
    "What's a nice compliment I could give a coworker?",
    "Tell me something that will make me smile.", "Hi, I'm new here. What can you help me with?",
    "What's your advice for a slow, lazy day?", "Can you describe a perfect picnic?",
    "What are some good questions to get to know someone?",
    "I'm waiting for a train. Tell me something fun.",
    "How do you stay positive when things go wrong?",
    "Share a tip that makes everyday life a little easier.",
    "What's a fun tradition I could start with my family?",
    "Good evening! What's a relaxing way to end the day?",
    "Can you cheer me up? I burned my toast this morning.",
    "What's the most interesting thing about the ocean?",
)

FAVORITE_THINGS: tuple[str, ...] = (
    "season", "kind of weather", "breakfast food", "board game", "type of music", "holiday",
    "animal", "time of day", "dessert", "book genre", "sport to watch", "planet", "color",
    "number", "fruit", "flower", "invention", "kind of tree", "ice cream flavor",
    "word in English", "type of cloud", "dinosaur", "musical instrument", "kind of bread",
    "constellation", "bird",
)

FAVORITE_PHRASINGS: tuple[str, ...] = (
    "What's your favorite {t}, and why?",
    "If you had to pick a favorite {t}, what would it be?",
    "Do you have a favorite {t}?",
    "Tell me your favorite {t} and convince me it's the best.",
    "What's the best {t}, in your opinion?",
)

ADVICE_SITUATIONS: tuple[str, ...] = (
    "I just started a new job and I feel overwhelmed.",
    "I'm moving to a new city where I don't know anyone.", "I have trouble waking up early.",
    "My roommate never cleans the kitchen.",
    "I want to get in shape but I don't enjoy going to the gym.",
    "I keep putting off studying for my exams.",
    "I'm nervous about giving a presentation at work next week.",
    "My best friend is moving abroad.", "I spend too much time on my phone.",
    "I want to save money but my paycheck always disappears too fast.",
    "I'm thinking about changing careers at 35.", "I forgot my friend's birthday yesterday.",
    "I have a job interview on Friday.", "My neighbors are loud late at night.",
    "I feel a bit lonely since I started working from home.",
    "I want to read more books but never find the time.",
    "My team at work disagrees about how to run a project.",
    "I'm going on my first solo trip next month.",
    "My kids argue about screen time every evening.",
    "I want to learn to cook but I'm scared of messing up.",
    "I said something unkind to a friend and I regret it.",
    "I'm starting university in the fall.", "I can't decide whether to adopt a cat or a dog.",
    "My garden plants keep dying.", "I get stressed when my inbox is full.",
    "I want to ask for a raise.", "My in-laws are staying with us for a week.",
    "I'm learning guitar but my fingers hurt.", "I want to get to know my neighbors.",
    "I feel tired every afternoon around 3 p.m.",
    "My grandfather wants to learn how to use a smartphone.",
    "I want to start running but I get out of breath quickly.",
    "I have too many hobbies and finish none of them.",
    "My manager only gives feedback when something goes wrong.",
    "I'm planning a small wedding on a tight budget.",
    "I want to feel more confident speaking up in meetings.",
    "I'm always late to appointments.", "I've been asked to lead a team for the first time.",
    "My apartment is cluttered and I don't know where to start.",
    "I want to write a novel but I don't know how to begin.",
    "I keep comparing myself to people online.", "My teenager barely talks to me.",
    "I want to eat healthier without giving up snacks.",
    "I'm taking a long flight next week and I get restless.",
    "I volunteered to organize the office party.",
    "I want to learn a language but I've given up twice before.",
    "My friend always cancels plans at the last minute.",
    "I'm retiring next year and worried about being bored.",
    "I have two job offers and can't decide between them.",
    "I'm nervous about meeting my partner's family.",
    "My dog pulls on the leash during walks.", "I want to drink less coffee.",
    "I'm studying and working at the same time.", "I got a bad grade on my first exam.",
    "I share an office with someone who talks all day.",
    "I'm anxious about driving on the highway.", "I want to spend less time in meetings.",
    "I can never decide what to cook for dinner.",
    "I just moved in with my partner and we argue about chores.",
    "I'm a new parent and I'm exhausted.",
    "I have to give a speech at my sister's wedding.",
    "I keep a journal but always stop after a week.",
    "I need to tell a client that a project will be late.",
    "A friend asked to borrow a large amount of money.",
    "I'm nervous about my first day volunteering at a hospital.",
    "I want to stay in touch with old school friends.",
    "I have a big exam in two weeks and I feel behind.", "I want my mornings to feel calmer.",
    "My coworker takes credit for my ideas.",
    "I'm visiting a country where I don't speak the language.",
    "I want to buy my first car.", "I find it hard to say no when people ask for favors.",
    "I've been feeling unmotivated lately.", "I want to get my kids interested in reading.",
    "I'm starting a small online shop.", "I want to redecorate my room on a small budget.",
)

ADVICE_ASKS: tuple[str, ...] = (
    "Any advice?", "What would you suggest?", "How should I handle it?",
    "Do you have any tips?", "What would you do in my place?", "Where should I start?",
    "Can you help me think it through?", "What are a few things I could try?",
    "How can I make this easier on myself?", "Give me some practical ideas.",
    "What's a good first step?", "Any thoughts?", "Be honest: what should I do?",
    "I'd love some gentle advice.",
)

CHAT_OPENERS: tuple[str, ...] = ("", "", "", "Hey, ", "Hi. ", "So, ", "Okay, ", "Honestly, ")

OPINION_TOPICS: tuple[str, ...] = (
    "working from home", "pineapple on pizza", "learning a second language as an adult",
    "electric scooters in cities", "four-day work weeks", "homework for young children",
    "reading the book before watching the movie", "open-plan offices",
    "cooking at home instead of eating out", "social media for teenagers", "tipping",
    "remakes of classic movies", "school uniforms", "living in a big city",
    "living in the countryside", "keeping a journal", "minimalism",
    "video games as a hobby", "self-checkout machines", "daylight saving time",
    "traveling alone", "reality TV", "group projects at school", "e-books", "audiobooks",
    "smart home devices", "fast fashion", "camping", "teaching coding in primary school",
    "public libraries", "getting up at 5 a.m.", "New Year's resolutions", "surprise parties",
    "buying secondhand clothes", "taking a gap year before university", "voice messages",
    "emoji in work emails", "board game nights", "working from coffee shops", "spoilers",
    "modern art", "cats as pets", "taking notes by hand", "superhero movies",
    "meal prepping", "bike lanes", "paying with cash", "handwritten letters",
    "tiny houses", "standing desks", "learning an instrument as an adult",
    "gardening as a hobby", "cold showers", "podcasts", "jigsaw puzzles",
    "long walks without a phone", "zoos", "space tourism", "the Oxford comma",
)

OPINION_PHRASINGS: tuple[str, ...] = (
    "What do you think about {t}?",
    "What are your thoughts on {t}?",
    "How do you feel about {t}?",
    "Give me your honest take on {t}.",
    "What are the pros and cons of {t}?",
    "My friend and I are debating {t}. What's your view?",
    "Make the case for and against {t}.",
    "I'm curious what you think of {t}.",
    "Share your opinion on {t} in a few sentences.",
    "What's the best argument in favor of {t}?",
)

DEBATES: tuple[tuple[str, str], ...] = (
    ("tea", "coffee"), ("cats", "dogs"), ("the beach", "the mountains"), ("summer", "winter"),
    ("paper books", "e-readers"), ("cooking", "baking"), ("city life", "country life"),
    ("sunrise", "sunset"), ("pancakes", "waffles"), ("board games", "video games"),
    ("a big party", "a small dinner with friends"), ("renting", "buying a home"),
    ("a laptop", "a desktop computer"), ("running", "swimming"), ("piano", "guitar"),
    ("a road trip", "a flight"), ("texting", "calling"), ("handwritten notes", "typed notes"),
    ("shopping online", "shopping in stores"), ("mystery novels", "science fiction"),
    ("hiking", "cycling"), ("a window seat", "an aisle seat"), ("breakfast", "dinner"),
    ("studying alone", "studying in a group"), ("pizza", "pasta"), ("spring", "autumn"),
    ("a small town", "a big city"), ("podcasts", "audiobooks"), ("trains", "buses"),
    ("early mornings", "late nights"),
)

DEBATE_PHRASINGS: tuple[str, ...] = (
    "Which is better: {a} or {b}?",
    "{A} or {b}? Pick one and explain why.",
    "Help me choose between {a} and {b}.",
    "Would you rather have {a} or {b}?",
    "Make a quick case for {a} over {b}, then argue the opposite.",
    "Be honest: {a} or {b}?",
)

RECOMMENDATIONS: tuple[str, ...] = (
    "a hobby I can do at home in the evenings", "a board game for a family of four",
    "a name for my new goldfish", "an easy houseplant for a dark room",
    "a fun weekend activity for a rainy day", "a gift for a friend who loves gardening",
    "a quick, healthy breakfast", "a relaxing way to end the day",
    "a topic for a podcast I could start", "a classic movie to watch with my parents",
    "a warm drink that isn't coffee", "a way to celebrate my dog's birthday",
    "a theme for a seventh birthday party", "a dish to bring to a potluck",
    "a simple craft to do with kids", "an outdoor activity for my grandparents",
    "a new sport to try as an adult", "a book genre for someone who rarely reads",
    "a cozy dinner for a cold night", "a thoughtful gift under 20 dollars",
    "a fun icebreaker for a team meeting", "a way to make my commute more enjoyable",
    "a kid-friendly science activity", "a hobby that gets me away from screens",
    "a weekend project to improve my apartment", "an easy dessert for a dinner party",
    "a snack for a long hike", "a way to make new friends as an adult",
    "a simple morning stretch routine", "a name for my book club",
    "a name for a small bakery", "a daily habit for better focus",
    "a fun way to learn geography", "a good first pet for a child",
    "a picnic menu for four people", "something to do on a long train ride",
    "a way to spend a free afternoon in {city}", "a souvenir to bring back from {city}",
    "a neighborhood to stay in when visiting {city}",
)

RECOMMEND_PHRASINGS: tuple[str, ...] = (
    "Can you suggest {r}?",
    "I'm looking for {r}. Any ideas?",
    "Recommend {r}, please.",
    "Do you have any ideas for {r}?",
    "What would you recommend as {r}?",
    "Help me think of {r}.",
)

LIFE_NEWS: tuple[str, ...] = (
    "finished my first half marathon", "adopted a rescue dog",
    "baked bread for the first time", "got into the university I wanted",
    "finally cleaned out my garage", "passed my driving test",
    "started learning the violin", "planted my first vegetable garden",
    "got promoted at work", "moved into my own apartment",
    "finished reading a 900-page novel", "ran my first 5K", "learned to swim",
    "paid off my student loan", "cooked dinner for ten people",
    "went a whole week without social media", "made my first website", "became an aunt",
    "won a local chess tournament", "finished a 1,000-piece puzzle",
    "gave my first public talk", "climbed a mountain for the first time",
    "built a bookshelf by myself", "got my first freelance client",
    "hiked my first overnight trail", "knitted my first sweater", "learned to make sushi",
    "saw the northern lights", "started volunteering at an animal shelter",
    "finished my first painting",
)

NEWS_PHRASINGS: tuple[str, ...] = (
    "I just {e}! {f}",
    "Guess what? I {e}. {f}",
    "Big news: I {e}! {f}",
    "Today I {e}. {f}",
    "I'm so proud, I {e}. {f}",
)

NEWS_FOLLOWUPS: tuple[str, ...] = (
    "I'm so happy!", "What should I do next?", "Can you help me plan the next step?",
    "I just wanted to tell someone.", "Any ideas for how to celebrate?",
    "I'm proud but a little nervous about what comes next.", "What do you think?",
    "What's a good next challenge?",
)

HYPOTHETICALS: tuple[str, ...] = (
    "If you could have dinner with any historical figure, who would it be and why?",
    "If you could live in any era, which would you choose?",
    "If you could instantly master one skill, what would it be?",
    "If animals could talk, which one would be the most interesting to chat with?",
    "If you could design a new holiday, what would it celebrate?",
    "If you could add one subject to every school, what would it be?",
    "If you could visit any planet, which one would you pick?",
    "If you had a free year with no obligations, how would you spend it?",
    "If you opened a cafe, what would you call it and what would you serve?",
    "If you could change one thing about how cities are designed, what would it be?",
    "If you could speak every language, what would you do first?",
    "If you could invent a new sport, what would the rules be?",
    "If you could only eat one cuisine for a year, which would it be?",
    "If you were a tree, what kind would you be?",
    "Would you rather live underwater or on the Moon?",
    "If you could be any fictional character for a day, who would you be?",
    "If you had a time machine for one trip, would you go to the past or the future?",
    "If you could make one rule that everyone had to follow, what would it be?",
    "If you could only keep three apps on your phone, which would they be?",
    "If you could design your dream house, what would it have?",
    "If you could teach a class on anything, what would it be?",
    "If you could live in any city in the world, where would it be?",
    "If you could get rid of one household chore forever, which would it be?",
    "If you could switch jobs with anyone for a week, who would it be?",
    "If every day had one extra hour, how would you use it?",
    "If you could bring back one extinct animal, which would it be?",
    "If you could have any view from your window, what would it be?",
    "If you wrote a book, what would it be about?",
)

HYPOTHETICAL_EXTRAS: tuple[str, ...] = (
    "Keep it short.", "Then ask me the same question.", "Be creative!",
    "Give me your top three.",
)

JOB_PHRASINGS: tuple[str, ...] = (
    "I'm thinking about becoming {aj}. What should I know?",
    "What is a typical day like for {aj}?",
    "What skills does a good {j} need?",
    "Is being {aj} a rewarding job? Why or why not?",
    "How would someone get started as {aj}?",
    "My cousin wants to be {aj}. What advice would you give?",
)

HOBBY_PHRASINGS: tuple[str, ...] = (
    "I want to get into {h}. Where should I start?",
    "Is {h} a good hobby for someone who works long hours?",
    "What do I need to start {h}?",
    "What do people enjoy about {h}?",
    "I tried {h} once and loved it. How can I get better?",
    "Convince me to try {h}.",
)

TRAVEL_PHRASINGS: tuple[str, ...] = (
    "I'm visiting {city} for {n} days. What should I not miss?",
    "What's the best time of year to visit {city}?",
    "What food should I try in {city}?",
    "Is {city} a good place for a family holiday?",
    "Plan a relaxed one-day itinerary for {city}.",
    "I have one evening in {city}. How should I spend it?",
)

CREATIVE_TOPICS: tuple[str, ...] = (
    "autumn leaves", "a lazy cat", "the first day of spring", "a cup of coffee",
    "the ocean at night", "a lost umbrella", "a robot learning to dance",
    "a snail's big adventure", "the city after rain", "a lighthouse keeper",
    "a grandmother's garden", "the last day of summer", "a very small dragon",
    "a library at midnight", "friendship", "a train journey", "the Moon", "a rainy Monday",
    "a dog waiting for its owner", "a mountain sunrise", "learning to ride a bike",
    "a forgotten toy", "a busy kitchen", "snow falling on a quiet street",
    "a penguin who wants to fly", "a birthday cake", "an old oak tree", "a thunderstorm",
    "the smell of fresh bread", "a clumsy wizard",
)

CREATIVE_PHRASINGS: tuple[str, ...] = (
    "Write a short poem about {t}.",
    "Tell me a bedtime story about {t}.",
    "Write a limerick about {t}.",
    "Write a haiku about {t}.",
    "Write a four-line rhyming poem about {t}.",
    "Tell me a very short story about {t}, in under 100 words.",
    "Write a cheerful song verse about {t}.",
)

# ---------------------------------------------------------------------------------------
# qa
# ---------------------------------------------------------------------------------------

FACT_QUESTIONS: tuple[str, ...] = (
    "How many legs does a spider have?", "What gas do plants take in from the air?",
    "Which planet is closest to the Sun?", "What is the largest ocean on Earth?",
    "How many continents are there?", "What is the freezing point of water in Celsius?",
    "Who painted the Mona Lisa?", "What is the chemical symbol for gold?",
    "How many days are in a leap year?", "What is the tallest mountain in the world?",
    "Which organ pumps blood through the body?", "What is the largest planet in our solar system?",
    "Who wrote 'Romeo and Juliet'?", "What is the main ingredient in guacamole?",
    "How many sides does a hexagon have?", "What do bees collect from flowers?",
    "What is the boiling point of water at sea level in Fahrenheit?",
    "Which animal is known as the ship of the desert?", "What is the smallest prime number?",
    "How many minutes are in a day?", "Which is the longest river in Africa?",
    "Which instrument usually has 88 keys?", "In which country is Machu Picchu?",
    "What is the hardest natural substance?", "Who developed the theory of general relativity?",
    "What does a thermometer measure?", "How many strings does a standard guitar have?",
    "What color do you get when you mix blue and yellow?", "What is the largest mammal?",
    "Which vitamin does the body make when skin is exposed to sunlight?",
    "What is the opposite of 'ancient'?", "What is the plural of 'mouse'?",
    "How many bones are in the adult human body?", "What is the currency of Japan?",
    "Which planet is known as the Red Planet?", "What is the square root of 144?",
    "What does DNA stand for?", "Who was the first person to walk on the Moon?",
    "What is the fastest land animal?", "How many hours are in a week?",
    "What do caterpillars turn into?", "Which metal is liquid at room temperature?",
    "What is the main gas in Earth's atmosphere?", "In what year did World War II end?",
    "What is the largest hot desert in the world?", "What is the largest country by area?",
    "What does CPU stand for?", "What is the name of our galaxy?",
    "What is it called when liquid water turns into vapor?",
    "How many players does a soccer team have on the field?",
    "What is the longest bone in the human body?",
    "Which blood cells help the body fight infection?",
    "What is the main language spoken in Brazil?", "What is a baby kangaroo called?",
    "What is the freezing point of water in Fahrenheit?",
    "How many teaspoons are in a tablespoon?", "What is the largest organ of the human body?",
    "Which ocean lies between Africa and Australia?", "What is the chemical symbol for sodium?",
    "Roughly how fast does light travel?", "How many zeros are in one million?",
    "What is the past tense of 'run'?", "What is a group of wolves called?",
    "What do you call a word that means the opposite of another word?",
    "Which planet is famous for its large, bright rings?", "What is the tallest animal?",
    "Where is the Great Barrier Reef?", "How many sides does an octagon have?",
    "What is the main ingredient of hummus?",
    "Which country gave the Statue of Liberty to the United States?",
    "Who wrote 'Pride and Prejudice'?", "What do we call animals that eat only plants?",
    "What is the chemical formula for table salt?", "How many weeks are in a year?",
    "What is the smallest planet in our solar system?",
    "How many degrees are in a right angle?", "What is the Roman numeral for 50?",
    "What is the smallest bone in the human body?", "Which gas do humans need to breathe?",
    "What is a synonym for 'quick'?",
    "What is the imaginary line that divides Earth into northern and southern halves?",
    "How long does it take Earth to orbit the Sun?", "Which continent is the coldest?",
    "What do you call a word that sounds like what it describes, such as 'buzz'?",
    "How many cents are in a dollar?", "What is the study of living things called?",
    "Is a dolphin a fish or a mammal?", "Is a tomato a fruit or a vegetable?",
    "Which is heavier, a kilogram of feathers or a kilogram of iron?",
    "Why do we see lightning before we hear thunder?",
    "If you face north and turn right, which direction are you facing?",
    "Which month has the fewest days?", "How many seconds are in an hour?",
    "What is the opposite of 'generous'?", "Which is bigger, 3/4 or 2/3?",
    "Can penguins fly?", "How many hearts does an octopus have?",
    "What is the largest moon of Saturn?", "Who discovered penicillin?",
    "Which mountain range separates Europe and Asia?",
    "What is the hottest planet in the solar system?",
    "What unit is used to measure electrical resistance?",
    "What force pulls objects toward the ground?",
    "Which part of a plant does most of the photosynthesis?",
    "How many chambers does the human heart have?",
    "What was the name of the first artificial satellite?",
    "What does a seismograph measure?", "What is the largest island in the world?",
    "What is the name of the line at 0 degrees longitude?",
    "In which city is the Eiffel Tower?", "What is the chemical symbol for iron?",
    "What do you call a scientist who studies rocks?", "What is the largest living bird?",
    "What is the opposite of 'horizontal'?", "How many colors are in a rainbow?",
    "What is the boiling point of water in Celsius at sea level?",
    "Which planet has the longest day?", "What is the largest lake in Africa?",
    "Which animal has black and white stripes and lives in Africa?",
    "What is the main job of the lungs?", "What do you call a baby cat?",
    "Which is longer, a mile or a kilometer?", "What is 10 squared?",
    "What language is the word 'kindergarten' borrowed from?",
)

FACT_WRAPPERS: tuple[str, ...] = (
    "{q}", "Quick question: {q}", "{q} Answer in one sentence.", "Do you know this? {q}",
    "{q} Please explain briefly.", "Trivia time! {q}", "{q} Just the answer, please.",
    "Can you help me with a quiz question? {q}", "{q} Explain how you know.",
)

COUNTRY_QUESTIONS: tuple[str, ...] = (
    "What is the capital of {c}?", "What is the official language of {c}?",
    "On which continent is {c}?", "What currency is used in {c}?",
    "What is {c} famous for?", "What is the climate like in {c}?",
)

SYLLOGISMS: tuple[tuple[str, str, str], ...] = (
    ("roses", "flowers", "red"), ("sparrows", "birds", "brown"), ("squares", "rectangles", "blue"),
    ("violins", "string instruments", "old"), ("oaks", "trees", "tall"),
    ("salmon", "fish", "large"), ("poodles", "dogs", "white"), ("sedans", "cars", "electric"),
    ("novels", "books", "long"), ("tulips", "plants", "yellow"),
    ("teachers", "adults", "tall"), ("apples", "fruits", "sour"),
)

RIDDLES: tuple[str, ...] = (
    "A farmer has 17 sheep and all but 9 run away. How many are left?",
    "If it takes 5 machines 5 minutes to make 5 widgets, how long would it take 100 machines "
    "to make 100 widgets?",
    "A bat and a ball cost $1.10 in total. The bat costs $1.00 more than the ball. How much "
    "does the ball cost?",
    "You have a 3-liter jug and a 5-liter jug. How can you measure exactly 4 liters of water?",
    "Tom's mother has three children: April, May and one more. What is the third child's "
    "name?",
    "How many months have 28 days?",
    "If there are 3 apples and you take away 2, how many apples do you have?",
    "A clock shows 3:00. What is the angle between the hour and minute hands?",
    "What is heavier: a ton of bricks or a ton of feathers?",
    "If a plane crashes exactly on the border of two countries, where do they bury the "
    "survivors?",
    "A rope ladder hangs over the side of a boat with its bottom rung at the water. The tide "
    "rises 1 meter. How many rungs are now underwater?",
    "I am an odd number. Take away one letter and I become even. What number am I?",
    "Which is more: six dozen dozen or half a dozen dozen?",
    "A snail climbs 3 meters up a wall each day and slips back 2 meters each night. How many "
    "days does it take to reach the top of a 10-meter wall?",
    "If you overtake the person in second place in a race, what place are you in?",
)

COUNT_WORDS: tuple[str, ...] = (
    "banana", "strawberry", "mississippi", "bookkeeper", "committee", "elephant", "necessary",
    "parallel", "occurrence", "balloon", "coffee", "success", "address", "assessment",
    "tomorrow", "pepper", "giraffe", "mammal", "letter", "raspberry", "accommodation",
    "butterfly", "referee", "possession", "cinnamon", "rhythm", "umbrella", "broccoli",
)

PASSAGE_QA_FORMATS: tuple[str, ...] = (
    "Read the passage and answer the question.\n\nPassage: {p}\n\nQuestion: {q}",
    "{p}\n\nBased on the text above, {lq}",
    "Context:\n{p}\n\nUsing only the context, answer: {q}",
    "Answer the question using the information in this text. If the text doesn't say, reply "
    "'not stated'.\n\nText: {p}\n\nQuestion: {q}",
    "Here is some background:\n\n{p}\n\nQuestion: {q} Please answer in one sentence.",
    "According to the passage below, {lq}\n\n{p}",
    "{p}\n\nQ: {q}\nA:",
    'I\'m reading this: "{p}"\n\n{q}',
    'Document:\n"""\n{p}\n"""\n\nQuestion: {q}\nAnswer briefly and quote the relevant part.',
    "Use the passage to answer. {q}\n\n{p}",
)

MULTI_DOC_FORMATS: tuple[str, ...] = (
    "Answer the question using the documents below. Say which document you used.\n\n"
    "{docs}\n\nQuestion: {q}",
    "{docs}\n\nOnly one of these documents is relevant. {q}",
    "Search results:\n\n{docs}\n\nBased on the search results, answer: {q}",
    "Question: {q}\n\nUse the most relevant source below and answer briefly.\n\n{docs}",
)

PASSAGE_GENERIC_QUESTIONS: tuple[str, ...] = (
    "What is the main idea of the passage?", "What is one fact mentioned in the passage?",
    "Does the passage mention any numbers? List them.",
    "Who or what is the passage mainly about?",
    "What question could this passage help someone answer?",
    "Is the tone of the passage positive, negative or neutral?",
    "What is the most surprising detail in the passage?",
    "What would be a good title for this passage?",
)

PASSAGE_UNANSWERABLE: tuple[str, ...] = (
    "Who wrote the passage?", "What happened the following year?",
    "How much does it cost to visit?", "What is the author's favorite color?",
)

# ---------------------------------------------------------------------------------------
# summarize
# ---------------------------------------------------------------------------------------

SUMMARIZE_PHRASINGS: tuple[str, ...] = (
    "Summarize the following passage in one sentence:\n\n{p}",
    "{p}\n\nSummarize this in two sentences.",
    "Give me a short summary of this text:\n\n{p}",
    "TL;DR this for me:\n\n{p}",
    "Can you summarize this paragraph for a busy reader?\n\n{p}",
    "Summarize the passage below in three bullet points.\n\n{p}",
    "What is the main idea of this passage? Answer in one sentence.\n\n{p}",
    "Write a one-line headline and a two-sentence summary for this text:\n\n{p}",
    "Summarize this for a 10-year-old:\n\n{p}",
    "Condense the following into about 30 words:\n\n{p}",
    "Read this and tell me the key points:\n\n{p}",
    "Text: {p}\n\nSummary:",
    'Here is a short piece titled "{title}":\n\n{p}\n\nPlease summarize it.',
    "{p}\n\nCan you give me the gist of this in plain language?",
    "Summarize this text in under 25 words:\n\n{p}",
    "I need a quick summary of this for my notes:\n\n{p}",
    "Please write a brief abstract of the following:\n\n{p}",
    "{p}\n\nWhat are the two most important points here?",
    'Summarize "{title}" (below) for someone who has no time to read it.\n\n{p}',
    "Make a short summary of this passage, keeping any numbers that matter:\n\n{p}",
    "Sum up this paragraph in a single tweet-length sentence:\n\n{p}",
    "In your own words, what does this passage say?\n\n{p}",
)

PAIR_SUMMARIZE_PHRASINGS: tuple[str, ...] = (
    "Summarize each of these two texts in one sentence.\n\nText 1: {p1}\n\nText 2: {p2}",
    'Here are two short pieces, "{t1}" and "{t2}". Give a two-line summary of each.\n\n'
    "{p1}\n\n{p2}",
    "Read both passages and write a short summary of each, then say whether they have "
    "anything in common.\n\nA: {p1}\n\nB: {p2}",
)

EMAIL_BODIES: tuple[str, ...] = (
    "I wanted to let you know that our {project} meeting on {day} has to move to {day2} at "
    "{time}, because the conference room is being repaired. Please bring the latest version "
    "of the budget if you can. If the new time doesn't work for you, let me know by tomorrow "
    "and I will try to find another slot.",
    "Thank you for your help with the {project} last week. The client was very happy with the "
    "presentation, especially the section on costs. They have asked for a short follow-up "
    "report by {day}, and I think you would be the best person to write the first draft. "
    "Could we talk about it over coffee on {day2}?",
    "Just a reminder that the office will be closed on {day} for the holiday. Anyone who "
    "needs access to the building should contact {name2} in advance. Deliveries scheduled "
    "for that day have been moved to {day2}. Have a restful break!",
    "I'm organizing a small farewell lunch for {name2}, who is leaving the team at the end of "
    "the month after six years. We plan to meet at {place} on {day} at {time}. Please reply "
    "by {day2} so I can book a table, and let me know if you have any dietary needs.",
    "Our team has finished testing the {project} and found two remaining problems: the "
    "login page is slow on older phones, and some reports show the wrong date format. Both "
    "should be fixed by {day}. After that, we plan to release the update on {day2}. Please "
    "tell me if you notice anything else we should check.",
    "I'm sorry, but I won't be able to attend the {project} workshop on {day}. My train was "
    "cancelled and the next one arrives too late. Could {name2} share the slides with me "
    "afterwards? I'm happy to join a short catch-up call on {day2} at {time} if that helps.",
    "We're planning the team's summer outing and would love your input. The two options are "
    "a boat trip or a cooking class at {place}. Please vote by {day} using the form I shared "
    "earlier. The outing itself will be on a {day2} afternoon in July.",
    "The invoice for the {project} is attached. Payment is due within thirty days, and you "
    "can pay by bank transfer or card. If anything on the invoice looks wrong, please contact "
    "{name2} in our accounts team before {day}. Thank you for working with us again.",
    "I'm writing to ask whether we could extend the deadline for the {project} by one week. "
    "Two team members have been ill, and we want to make sure the final version is properly "
    "checked. If you agree, the new delivery date would be {day2} next week. I'm available "
    "to discuss this on {day} at {time}.",
    "Welcome to the team! Your first day is {day}. Please arrive at {time} and ask for "
    "{name2} at the front desk, who will give you your badge and laptop. In your first week "
    "you'll meet everyone working on the {project}, and on {day2} we'll have lunch together.",
)

EMAIL_PROJECTS: tuple[str, ...] = (
    "website redesign", "quarterly report", "customer survey", "inventory system",
    "mobile app", "training program", "office move", "spring catalog", "newsletter",
    "hiring plan", "budget review", "product launch",
)
EMAIL_PLACES: tuple[str, ...] = (
    "the Italian place on Main Street", "the cafe across the road", "Lotus Garden",
    "the rooftop terrace", "the harbor restaurant", "the food hall downtown",
)
EMAIL_TIMES: tuple[str, ...] = ("9 a.m.", "10:30", "noon", "1 p.m.", "2 p.m.", "3:15 p.m.")
EMAIL_GREETINGS: tuple[str, ...] = ("Hi {name},", "Hello {name},", "Dear {name},")
EMAIL_SIGNOFFS: tuple[str, ...] = ("Best,", "Thanks,", "Cheers,", "Kind regards,")

EMAIL_PHRASINGS: tuple[str, ...] = (
    "Summarize this email in one sentence:\n\n{e}",
    "What does this email ask me to do? Summarize it briefly.\n\n{e}",
    "Give me the key points of this email as bullet points:\n\n{e}",
    "I don't have time to read this. What's the gist?\n\n{e}",
    "Summarize the following email and list any dates or deadlines:\n\n{e}",
    "{e}\n\nSummarize the message above in two sentences.",
)

MEETING_TEAMS: tuple[str, ...] = (
    "design", "marketing", "support", "engineering", "sales", "events", "finance",
    "library volunteer", "parent-teacher association", "garden club",
)
MEETING_NOTES: tuple[str, ...] = (
    "{name} will send the updated timeline by Friday.",
    "The budget for the {project} was approved.",
    "We agreed to move the weekly check-in to Tuesday mornings.",
    "Customer complaints about shipping delays have dropped by half since March.",
    "{name} raised concerns about the workload during the holidays.",
    "The new intern starts next Monday; {name} will show them around.",
    "We still need a volunteer to organize the summer party.",
    "The printer on the second floor will be replaced next week.",
    "Sales in the northern region are 8 percent above target.",
    "{name} proposed a shared calendar for vacation requests, and everyone agreed.",
    "The website will be offline for maintenance on Sunday night.",
    "The team voted to try a no-meeting Wednesday for one month.",
    "{name} will collect feedback from customers about the {project}.",
    "The supplier raised prices by 5 percent; {name} will look for alternatives.",
    "We decided to postpone the {project} until after the summer.",
    "Two new members joined the group this month.",
    "The fundraising goal for the year has already been reached.",
    "{name} asked everyone to update their contact details in the shared folder.",
)
MEETING_PHRASINGS: tuple[str, ...] = (
    "Summarize these meeting notes in a short paragraph:\n\n{m}",
    "Turn these notes into a two-sentence summary for people who missed the meeting:\n\n{m}",
    "What were the main decisions and action items in this meeting?\n\n{m}",
    "Write a brief recap of this meeting:\n\n{m}",
    "{m}\n\nSummarize the notes above and list who is responsible for what.",
)

REVIEW_PRODUCTS: tuple[str, ...] = (
    "electric kettle", "blender", "desk lamp", "vacuum cleaner", "coffee grinder",
    "wireless speaker", "backpack", "office chair", "rain jacket", "water bottle",
    "yoga mat", "frying pan", "pair of hiking boots", "bike helmet", "toaster",
)
REVIEW_OPENINGS: tuple[str, ...] = (
    "I bought this {product} about a month ago to replace my old one.",
    "I was hesitant to spend this much on a {product}.",
    "This is the second {product} I've owned from this brand.",
    "My partner gave me this {product} as a birthday present.",
    "I needed a new {product} quickly and picked this one because of the reviews.",
)
# (praise, complaint) about one aspect; a review takes each aspect it mentions one way.
REVIEW_ASPECTS: tuple[tuple[str, str], ...] = (
    ("It arrived two days early and was well packed.", "It took almost two weeks to arrive."),
    ("It looks even better than in the photos.",
     "The color is slightly different from the photos."),
    ("It feels sturdy and well made.", "It feels a little cheap in places."),
    ("For the price, the quality is excellent.", "It's overpriced for what you get."),
    ("It's lighter than my old one, which I appreciate.", "It's a bit heavier than I expected."),
    ("Customer service answered my question within an hour.",
     "Customer service took a week to answer my email."),
    ("The packaging was minimal and recyclable.",
     "There was far too much plastic in the packaging."),
    ("It was ready to use straight out of the box.", "The instructions were confusing."),
    ("It arrived in perfect condition.", "It arrived with a small scratch on one side."),
)
REVIEW_POSITIVE_VERDICTS: tuple[str, ...] = (
    "Overall, I'd give it four stars.", "Five stars, no regrets.",
    "I would happily buy it again.", "I'd recommend it to a friend.",
)
REVIEW_NEGATIVE_VERDICTS: tuple[str, ...] = (
    "I'm keeping it, but I wouldn't buy it again.", "Two stars from me.",
    "Three stars: fine, but nothing special.", "I'm returning it and trying another brand.",
    "I would recommend it only if it's on sale.",
)
REVIEW_PHRASINGS: tuple[str, ...] = (
    "Summarize this customer review in one sentence:\n\n{r}",
    "Is this review positive or negative overall? Summarize the main reasons.\n\n{r}",
    "Give me a quick pros-and-cons summary of this review:\n\n{r}",
    "{r}\n\nSummarize what this reviewer liked and disliked.",
)

# ---------------------------------------------------------------------------------------
# math (numbers are drawn at random; only names and counted items come from fillers)
# ---------------------------------------------------------------------------------------

ARITH_TEMPLATES: tuple[str, ...] = (
    "What is {a} + {b}?", "What is {a} plus {c}?", "Calculate {a} - {b}.",
    "What is {a} minus {c}?", "What is {a} × {b}?", "Compute {a} * {small}.",
    "What is {small} times {b}?", "What is {q} divided by {small}?", "Divide {q} by {small}.",
    "Work out {a} + {b} - {c}.", "Evaluate ({small} + {small2}) × {b}.",
    "What is {small} squared?", "What is the square root of {sq}?", "What is {x} + {y}?",
    "Subtract {y} from {x}.",
    "What is {n1}/{d1} + {n2}/{d2}? Give the answer as a simplified fraction.",
    "What is {n1}/{d1} of {g1}?", "Round {x} to the nearest whole number.",
    "Round {x} to one decimal place.", "Is {q} divisible by {small}? Explain how you can tell.",
    "What is the greatest common divisor of {g1} and {g2}?",
    "What is the least common multiple of {small} and {small2}?",
    "Put these numbers in order from smallest to largest: {order_list}.",
    "What is {a} × {small} + {c}?", "What is 2 to the power of {exp}?",
    "Write {frac_n}/{frac_d} as a decimal.", "What is {big} rounded to the nearest hundred?",
    "Estimate {a} × {b} by rounding, then find the exact answer.",
    "What is the average of {small}, {small2}, {b} and {c}?",
    "I have {a} and need to reach {big}. How much more do I need?",
)

PERCENT_TEMPLATES: tuple[str, ...] = (
    "What is {pct}% of {base}?", "Calculate {pct} percent of {base}.",
    "{part} is what percent of {whole}?",
    "A price rises by {pct}% from ${price}. What is the new price?",
    "If {part} out of {whole} people surveyed said yes, what percentage is that?",
    "Increase {base} by {pct}%.", "Decrease {base} by {pct}%.",
    "A test has {whole} questions and {name} got {part} right. What is the score as a "
    "percentage?",
    "A town's population grew from {old} to {new}. What was the percentage growth?",
    "A {thing} costs ${price}. It is on sale for {pct}% off. What is the sale price?",
    "{name} left a {tip}% tip on a ${bill} restaurant bill. How much was the tip, and what "
    "was the total?",
    "A {thing} was reduced from ${price} to ${sale}. What percentage discount is that?",
    "Which is the better deal on a ${price} {thing}: {pct}% off, or ${flat} off?",
    "Sales tax is {tax}%. How much tax is paid on a purchase of ${price}?",
    "A savings account pays {rate}% interest per year. How much interest does ${deposit} "
    "earn in one year?",
    "{name} spent {pct}% of a ${bill} budget on food. How much money is left for other things?",
)

SHOP_THINGS: tuple[str, ...] = (
    "shirt", "lamp", "bicycle", "pair of shoes", "board game", "backpack", "coffee maker",
    "book", "tent", "jacket", "phone case", "desk chair",
)

UNIT_CONVERSIONS: tuple[tuple[str, str, int, int], ...] = (
    ("kilometers", "miles", 1, 200), ("miles", "kilometers", 1, 150),
    ("kilograms", "pounds", 1, 120), ("pounds", "kilograms", 1, 250),
    ("degrees Celsius", "degrees Fahrenheit", -20, 45),
    ("degrees Fahrenheit", "degrees Celsius", 0, 110), ("liters", "gallons", 1, 80),
    ("meters", "feet", 1, 500), ("feet", "meters", 1, 1000),
    ("inches", "centimeters", 1, 80), ("centimeters", "inches", 1, 250),
    ("hours", "minutes", 1, 48), ("minutes", "seconds", 1, 90), ("days", "hours", 1, 30),
    ("cups", "milliliters", 1, 8), ("ounces", "grams", 1, 40),
    ("square meters", "square feet", 5, 200),
    ("kilometers per hour", "meters per second", 5, 150), ("megabytes", "kilobytes", 1, 900),
    ("weeks", "days", 1, 52), ("grams", "kilograms", 100, 9000),
    ("milliliters", "liters", 50, 5000), ("meters", "centimeters", 1, 40),
    ("seconds", "minutes", 60, 3600), ("years", "months", 1, 20),
    ("hectares", "square meters", 1, 30),
)

UNIT_PHRASINGS: tuple[str, ...] = (
    "Convert {x} {u1} to {u2}.",
    "How many {u2} are in {x} {u1}?",
    "What is {x} {u1} in {u2}?",
    "I have {x} {u1}. How much is that in {u2}?",
    "Change {x} {u1} into {u2} and explain the formula.",
    "Quick conversion: {x} {u1} to {u2}?",
)

ALGEBRA_TEMPLATES: tuple[str, ...] = (
    "Solve for x: {a}x + {b} = {c}.",
    "Find x if {a}x + {b} = {c}.",
    "Solve {a2}(x + {b2}) = {c2}.",
    "If {a} times a number plus {b} equals {c}, what is the number?",
    "Solve the system of equations: x + y = {s} and x - y = {d}.",
    "Simplify {a}(x + {b2}) - {a2}x.",
    "Expand (x + {r1})(x + {r2}).",
    "Factor x² + {rsum}x + {rprod}.",
    "What is the value of {m}x² + {e} when x = {xv}?",
    "The sum of two consecutive integers is {cons}. What are the integers?",
    "A number doubled and then increased by {b} gives {c3}. What is the number?",
    "Solve the inequality {a}x + {b} > {c}.",
    "Two numbers add up to {s} and differ by {ad}. What are they?",
    "If y = {a}x - {b}, what is y when x = {xv}?",
    "What is the slope of the line through the points ({p1}, {q1}) and ({p2}, {q2})?",
    "Solve for y: y / {a} = {xv}.",
)

# (template, {slot: (low, high, step)}); {name}, {name2} and {items} come from fillers.
WORD_PROBLEMS: tuple[tuple[str, dict[str, tuple[int, int, int]]], ...] = (
    ("{name} has {a} {items}. {name2} gives {name} {b} more, and then {name} gives away {c}. "
     "How many {items} does {name} have now?", {"a": (10, 60, 1), "b": (2, 25, 1),
                                                "c": (1, 9, 1)}),
    ("A train travels at {a} km/h for {b} hours. How far does it travel?",
     {"a": (40, 180, 5), "b": (2, 6, 1)}),
    ("{name} reads {a} pages every day. How many days will it take to finish a book with "
     "{b} pages?", {"a": (10, 40, 5), "b": (150, 600, 10)}),
    ("A rectangular garden is {a} meters long and {b} meters wide. What is its area, and how "
     "much fencing is needed to go around it?", {"a": (4, 40, 1), "b": (3, 25, 1)}),
    ("A recipe for {a} people needs {b} grams of flour. How much flour is needed for {c} "
     "people?", {"a": (2, 6, 1), "b": (100, 500, 50), "c": (3, 12, 1)}),
    ("{name} saves ${a} each week. How many weeks will it take to save ${b}?",
     {"a": (5, 50, 5), "b": (100, 1000, 50)}),
    ("The temperatures this week were {a}, {b}, {c}, {d} and {e} degrees. What was the "
     "average temperature?", {"a": (-5, 30, 1), "b": (-5, 30, 1), "c": (-5, 30, 1),
                              "d": (-5, 30, 1), "e": (-5, 30, 1)}),
    ("{c} friends share a restaurant bill of ${a} and want to leave a {b}% tip. How much "
     "should each person pay?", {"a": (40, 200, 1), "b": (10, 20, 5), "c": (2, 6, 1)}),
    ("A car uses {a} liters of fuel per 100 km. How much fuel does it need for a {b} km "
     "trip?", {"a": (5, 9, 1), "b": (120, 800, 10)}),
    ("{name} is {a} years old. {name2} is {b} years older than {name}. How old will {name2} "
     "be in {c} years?", {"a": (6, 40, 1), "b": (2, 15, 1), "c": (3, 20, 1)}),
    ("A bag contains {a} red marbles and {b} blue marbles. If you pick one at random, what "
     "is the probability that it is red?", {"a": (2, 15, 1), "b": (2, 15, 1)}),
    ("A tank holds {a} liters of water and is being filled at {b} liters per minute. How "
     "long until it is full?", {"a": (100, 2000, 50), "b": (5, 40, 5)}),
    ("{name} ran {a} km on Monday, {b} km on Wednesday and {c} km on Saturday. How far did "
     "{name} run in total, and what was the average per run?",
     {"a": (2, 15, 1), "b": (2, 15, 1), "c": (2, 21, 1)}),
    ("A class has {a} students. {b} of them walk to school, and the rest take the bus. "
     "What fraction of the class takes the bus?", {"a": (20, 36, 1), "b": (3, 18, 1)}),
    ("A phone plan costs ${a} per month plus ${b} for every gigabyte over the limit. If "
     "{name} uses {c} extra gigabytes, what is the bill?",
     {"a": (10, 60, 5), "b": (2, 10, 1), "c": (1, 8, 1)}),
    ("A worker earns ${a} per hour and works {b} hours a week. How much does the worker earn "
     "in {c} weeks?", {"a": (12, 45, 1), "b": (15, 40, 5), "c": (2, 12, 1)}),
    ("A pizza is cut into {a} slices. {name} eats {b} slices and {name2} eats {c}. What "
     "fraction of the pizza is left?", {"a": (8, 12, 2), "b": (2, 4, 1), "c": (1, 3, 1)}),
    ("A cyclist rides {a} km in {b} hours. What is the average speed?",
     {"a": (20, 120, 5), "b": (2, 6, 1)}),
    ("{name} planted {a} rows of tomatoes with {b} plants in each row. If each plant gives "
     "about {c} tomatoes, how many tomatoes can {name} expect?",
     {"a": (3, 12, 1), "b": (4, 15, 1), "c": (8, 30, 1)}),
    ("A printer prints {a} pages per minute. How long will it take to print {b} copies of a "
     "{c}-page report?", {"a": (10, 40, 5), "b": (5, 60, 5), "c": (4, 30, 1)}),
    ("A school trip has {a} students, and each bus holds {b} students. How many buses are "
     "needed?", {"a": (40, 300, 1), "b": (30, 55, 5)}),
    ("{name} wants to tile a floor that is {a} m by {b} m. Each box of tiles covers {c} "
     "square meters. How many boxes are needed?", {"a": (2, 9, 1), "b": (2, 8, 1),
                                                   "c": (1, 3, 1)}),
    ("An online course has {a} lessons. {name} finishes {b} lessons per week. After {c} "
     "weeks, how many lessons are left?", {"a": (40, 80, 1), "b": (2, 5, 1), "c": (2, 6, 1)}),
    ("A box of {a} {items} is shared equally among {b} children. How many does each child "
     "get, and how many are left over?", {"a": (20, 100, 1), "b": (3, 9, 1)}),
    ("{name} invests ${a} at a simple interest rate of {b}% per year. How much interest is "
     "earned after {c} years?", {"a": (500, 10000, 500), "b": (2, 8, 1), "c": (2, 10, 1)}),
    ("A map uses a scale of 1 cm to {a} km. Two towns are {b} cm apart on the map. How far "
     "apart are they in real life?", {"a": (2, 50, 1), "b": (3, 25, 1)}),
    ("A water bottle holds {a} ml. How many bottles can be filled from a {b}-liter jug?",
     {"a": (250, 750, 50), "b": (2, 20, 1)}),
    ("It takes {a} workers {b} days to paint a building. How long would it take {c} workers "
     "working at the same rate?", {"a": (2, 8, 1), "b": (6, 24, 2), "c": (3, 12, 1)}),
    ("A bakery makes {a} loaves a day and sells each for ${b}. If it sells {c}% of them, how "
     "much money does it make in a day?", {"a": (50, 300, 10), "b": (2, 7, 1),
                                           "c": (60, 100, 5)}),
    ("{name} has a {a}-minute commute each way and works {b} days a week. How many hours a "
     "week does {name} spend commuting?", {"a": (10, 75, 5), "b": (3, 6, 1)}),
    ("{name} collected {a} {items} and wants to put them into bags of {b}. How many full "
     "bags can {name} make?", {"a": (30, 200, 1), "b": (4, 12, 1)}),
    ("A library lends out {a} books a day. How many books does it lend in {b} weeks if it is "
     "open {c} days a week?", {"a": (40, 400, 10), "b": (2, 8, 1), "c": (5, 7, 1)}),
    ("A swimming pool is {a} meters long. {name} swims {b} lengths. How many kilometers is "
     "that?", {"a": (25, 50, 25), "b": (10, 80, 2)}),
    ("{name} is saving for a bike that costs ${a}. {name} already has ${b} and earns ${c} a "
     "week from a paper round. How many weeks until {name} can buy the bike?",
     {"a": (150, 600, 10), "b": (10, 100, 5), "c": (10, 40, 5)}),
)

GROCERY_ITEMS: tuple[str, ...] = (
    "yogurts", "batteries", "eggs", "tea bags", "granola bars", "bread rolls", "soap bars",
)

MATH_SUFFIXES: tuple[str, ...] = (
    "Show your work.", "Explain each step.", "Just give the final answer.",
    "Please check your answer at the end.", "Explain it like I'm in fourth grade.",
    "Think step by step.",
)

ORDER_RELATIONS: tuple[tuple[str, str, str], ...] = (
    ("taller than", "Who is the tallest?", "Who is the shortest?"),
    ("older than", "Who is the oldest?", "Who is the youngest?"),
    ("faster than", "Who is the fastest?", "Who is the slowest?"),
    ("heavier than", "Who is the heaviest?", "Who is the lightest?"),
    ("richer than", "Who has the most money?", "Who has the least money?"),
)

# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def _flat(text: str) -> str:
    """Collapse a wrapped, indented passage into one paragraph."""
    return " ".join(text.split())


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _lower_first(text: str) -> str:
    """Lower-case the first letter, unless the text starts with the pronoun I."""
    first = text.split(" ", 1)[0]
    if first == "I" or first.startswith("I'"):
        return text
    return text[:1].lower() + text[1:]


def _with_article(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _join(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def _maybe(rng: random.Random, p: float, options: Sequence[str]) -> str:
    """One of ``options`` with probability ``p``, else the empty string."""
    return rng.choice(options) if rng.random() < p else ""


def _casual(rng: random.Random, text: str, p: float = 0.08) -> str:
    """Sometimes make a one-line prompt look typed in a hurry (lower case, no end mark)."""
    if "\n" in text or rng.random() >= p:
        return text
    text = _lower_first(text)
    if text.endswith(("?", ".")) and not text.endswith(".."):
        text = text[:-1]
    return text


def _count(rng: random.Random, low: int = 3, high: int = 10) -> str:
    n = rng.randint(low, high)
    return NUMBER_WORDS.get(n, str(n)) if rng.random() < 0.6 else str(n)


def _choice_across(rng: random.Random, *pools: Sequence[Any]) -> Any:
    """Pick uniformly from the union of several pools without building it."""
    index = rng.randrange(sum(len(pool) for pool in pools))
    for pool in pools:
        if index < len(pool):
            return pool[index]
        index -= len(pool)
    raise AssertionError("unreachable")


def _code_block(snippet: Snippet) -> str:
    return f"```{snippet.lang}\n{textwrap.dedent(snippet.code).strip()}\n```"


def _money(value: float) -> str:
    return f"{value:.2f}" if value != int(value) else str(int(value))


# ---------------------------------------------------------------------------------------
# Generators: each returns one prompt built from one side (train or eval) of the fillers.
# ---------------------------------------------------------------------------------------

# chat -----------------------------------------------------------------------------------


def _chat_small_talk(rng: random.Random, f: Fillers) -> str:
    return _casual(rng, rng.choice(f["small_talk"]), p=0.2)


def _chat_favorite(rng: random.Random, f: Fillers) -> str:
    return rng.choice(FAVORITE_PHRASINGS).format(t=rng.choice(f["favorite_things"]))


def _chat_advice(rng: random.Random, f: Fillers) -> str:
    opener = rng.choice(CHAT_OPENERS)
    situation = rng.choice(f["advice_situations"])
    if opener:
        situation = _lower_first(situation)
    ask = rng.choice(ADVICE_ASKS)
    if opener.startswith("Honestly") and ask.startswith("Be honest"):
        ask = ADVICE_ASKS[0]
    return _casual(rng, f"{opener}{situation} {ask}", p=0.05)


def _chat_opinion(rng: random.Random, f: Fillers) -> str:
    return _casual(rng, rng.choice(OPINION_PHRASINGS).format(t=rng.choice(f["opinion_topics"])))


def _chat_debate(rng: random.Random, f: Fillers) -> str:
    a, b = rng.choice(f["debates"])
    if rng.random() < 0.5:
        a, b = b, a
    return rng.choice(DEBATE_PHRASINGS).format(a=a, b=b, A=_cap(a))


def _chat_recommend(rng: random.Random, f: Fillers) -> str:
    request = rng.choice(f["recommendations"]).format(city=rng.choice(f["cities"]))
    return _casual(rng, rng.choice(RECOMMEND_PHRASINGS).format(r=request))


def _chat_news(rng: random.Random, f: Fillers) -> str:
    return rng.choice(NEWS_PHRASINGS).format(
        e=rng.choice(f["life_news"]), f=rng.choice(NEWS_FOLLOWUPS)
    )


def _chat_hypothetical(rng: random.Random, f: Fillers) -> str:
    return _join(rng.choice(f["hypotheticals"]), _maybe(rng, 0.4, HYPOTHETICAL_EXTRAS))


def _chat_job(rng: random.Random, f: Fillers) -> str:
    job = rng.choice(f["jobs"])
    return rng.choice(JOB_PHRASINGS).format(j=job, aj=_with_article(job))


def _chat_hobby(rng: random.Random, f: Fillers) -> str:
    return _casual(rng, rng.choice(HOBBY_PHRASINGS).format(h=rng.choice(f["hobbies"])))


def _chat_travel(rng: random.Random, f: Fillers) -> str:
    days = rng.choice(("two", "three", "four", "five"))
    return rng.choice(TRAVEL_PHRASINGS).format(city=rng.choice(f["cities"]), n=days)


def _chat_creative(rng: random.Random, f: Fillers) -> str:
    return rng.choice(CREATIVE_PHRASINGS).format(t=rng.choice(f["creative_topics"]))


# explain --------------------------------------------------------------------------------


def _explain_extras(rng: random.Random, base: str, p_constraint: float = 0.5) -> str:
    return _join(
        _maybe(rng, 0.15, EXPLAIN_PREFIXES), base, _maybe(rng, p_constraint, EXPLAIN_CONSTRAINTS)
    )


def _explain_concept(rng: random.Random, f: Fillers) -> str:
    concept = _choice_across(
        rng, f["science_concepts"], f["tech_concepts"], f["society_concepts"]
    )
    base = rng.choice(EXPLAIN_PHRASINGS).format(c=concept)
    return _casual(rng, _explain_extras(rng, base))


def _explain_history(rng: random.Random, f: Fillers) -> str:
    base = rng.choice(HISTORY_PHRASINGS).format(e=rng.choice(f["history_events"]))
    return _casual(rng, _explain_extras(rng, base))


def _explain_wonder(rng: random.Random, f: Fillers) -> str:
    base = rng.choice(WONDER_PHRASINGS).format(q=rng.choice(f["wonder_questions"]))
    return _casual(rng, _explain_extras(rng, base, p_constraint=0.3))


def _explain_compare(rng: random.Random, f: Fillers) -> str:
    a, b = rng.choice(f["compare_pairs"])
    if rng.random() < 0.3:
        a, b = b, a
    base = rng.choice(COMPARE_PHRASINGS).format(a=a, b=b, A=_cap(a))
    return _explain_extras(rng, base, p_constraint=0.35)


# howto ----------------------------------------------------------------------------------


def _howto(rng: random.Random, f: Fillers) -> str:
    base = rng.choice(HOWTO_PHRASINGS).format(t=rng.choice(f["howto_tasks"]))
    text = _join(
        _maybe(rng, 0.15, HOWTO_CONTEXTS), base, _maybe(rng, 0.5, HOWTO_CONSTRAINTS)
    )
    return _casual(rng, text)


# code -----------------------------------------------------------------------------------


def _code_write(rng: random.Random, f: Fillers) -> str:
    lang = rng.choice(CODE_LANGS)
    base = rng.choice(CODE_WRITE_PHRASINGS).format(lang=lang, t=rng.choice(f["code_tasks"]))
    extras = CODE_CONSTRAINTS + (PYTHON_CONSTRAINTS if lang == "Python" else ())
    return _join(base, _maybe(rng, 0.45, extras))


def _code_sql(rng: random.Random, f: Fillers) -> str:
    schema, tasks = rng.choice(f["sql_tasks"])
    return rng.choice(SQL_PHRASINGS).format(schema=schema, t=rng.choice(tasks))


def _code_shell(rng: random.Random, f: Fillers) -> str:
    return rng.choice(SHELL_PHRASINGS).format(t=rng.choice(f["shell_tasks"]))


def _code_fix(rng: random.Random, f: Fillers) -> str:
    snippet: Snippet = rng.choice(f["buggy_snippets"])
    return rng.choice(CODE_FIX_PHRASINGS).format(
        lang=LANG_NAMES[snippet.lang],
        goal=snippet.goal,
        symptom=snippet.symptom,
        code=_code_block(snippet),
    )


def _code_explain(rng: random.Random, f: Fillers) -> str:
    snippet: Snippet = rng.choice(f["explain_snippets"])
    return rng.choice(CODE_EXPLAIN_PHRASINGS).format(
        lang=LANG_NAMES[snippet.lang], code=_code_block(snippet)
    )


def _code_question(rng: random.Random, f: Fillers) -> str:
    extras = ("Keep it short.", "Include a small code example.", "I'm a beginner.")
    return _join(rng.choice(f["programming_questions"]), _maybe(rng, 0.35, extras))


# math -----------------------------------------------------------------------------------


def _math_suffix(rng: random.Random, text: str, p: float = 0.35) -> str:
    return _join(text, _maybe(rng, p, MATH_SUFFIXES))


def _math_arithmetic(rng: random.Random, f: Fillers) -> str:
    a, b, c = rng.randint(12, 999), rng.randint(2, 99), rng.randint(2, 500)
    small, small2, k = rng.randint(2, 25), rng.randint(2, 25), rng.randint(4, 30)
    d1, d2 = rng.choice((2, 3, 4, 5, 6, 8)), rng.choice((2, 3, 4, 5, 6, 8, 10))
    order = [f"{rng.uniform(0, 3):.{rng.randint(1, 3)}f}" for _ in range(4)]
    order.append(f"{rng.randint(1, 3)}/{rng.choice((2, 4, 5))}")
    rng.shuffle(order)
    values = {
        "a": a, "b": b, "c": c, "small": small, "small2": small2, "q": a * small,
        "sq": k * k, "x": f"{rng.uniform(1, 100):.2f}", "y": f"{rng.uniform(1, 50):.1f}",
        "n1": rng.randint(1, d1 - 1), "d1": d1, "n2": rng.randint(1, d2 - 1), "d2": d2,
        "g1": small * rng.randint(2, 12), "g2": small * rng.randint(2, 12),
        "exp": rng.randint(3, 12), "frac_n": rng.randint(1, 7),
        "frac_d": rng.choice((4, 5, 8, 10, 20, 25)), "big": rng.randint(1000, 99999),
        "order_list": ", ".join(order),
    }
    return _math_suffix(rng, rng.choice(ARITH_TEMPLATES).format(**values))


def _math_percent(rng: random.Random, f: Fillers) -> str:
    whole = rng.randint(20, 400)
    old = rng.randrange(800, 50000, 10)
    price = rng.randint(12, 400)
    values = {
        "pct": rng.choice((5, 10, 12, 15, 20, 25, 30, 35, 40, 50, 60, 75)),
        "base": rng.randrange(20, 2000, 10), "whole": whole, "part": rng.randint(1, whole),
        "old": old, "new": old + rng.randint(old // 50, old // 2), "price": price,
        "sale": price - rng.randint(1, price // 2), "flat": rng.randint(5, price // 3 + 5),
        "tip": rng.choice((10, 12, 15, 18, 20)), "bill": rng.randint(20, 250),
        "tax": rng.choice((5, 6, 7.5, 8, 10, 20)), "rate": rng.choice((1.5, 2, 2.5, 3, 4, 5)),
        "deposit": rng.randrange(500, 20000, 100), "thing": rng.choice(SHOP_THINGS),
        "name": rng.choice(f["names"]),
    }
    return _math_suffix(rng, rng.choice(PERCENT_TEMPLATES).format(**values))


def _math_units(rng: random.Random, f: Fillers) -> str:
    unit_from, unit_to, low, high = rng.choice(UNIT_CONVERSIONS)
    if rng.random() < 0.3 and high <= 1000:
        amount = f"{rng.uniform(low, high):.1f}"
    else:
        amount = str(rng.randint(low, high))
    text = rng.choice(UNIT_PHRASINGS).format(x=amount, u1=unit_from, u2=unit_to)
    return _math_suffix(rng, text, p=0.25)


def _math_algebra(rng: random.Random, f: Fillers) -> str:
    x, a, b = rng.randint(-9, 15), rng.randint(2, 9), rng.randint(1, 40)
    a2, b2 = rng.randint(2, 6), rng.randint(1, 9)
    px, py = rng.randint(1, 20), rng.randint(1, 20)
    r1, r2 = rng.randint(1, 9), rng.randint(1, 9)
    values = {
        "a": a, "b": b, "c": a * x + b, "a2": a2, "b2": b2, "c2": a2 * (x + b2),
        "s": px + py, "d": px - py, "ad": abs(px - py) or 2, "r1": r1, "r2": r2,
        "rsum": r1 + r2, "rprod": r1 * r2, "m": rng.randint(2, 5), "e": rng.randint(2, 9),
        "xv": rng.randint(1, 6), "cons": 2 * rng.randint(5, 60) + 1, "c3": 2 * x + b,
        "p1": rng.randint(-5, 5), "q1": rng.randint(-5, 5),
        "p2": rng.randint(6, 12), "q2": rng.randint(-5, 15),
    }
    return _math_suffix(rng, rng.choice(ALGEBRA_TEMPLATES).format(**values))


def _math_word_template(rng: random.Random, f: Fillers) -> str:
    template, ranges = rng.choice(WORD_PROBLEMS)
    name, name2 = rng.sample(list(f["names"]), 2)
    numbers = {key: rng.randrange(lo, hi + 1, step) for key, (lo, hi, step) in ranges.items()}
    text = template.format(name=name, name2=name2, items=rng.choice(f["items"]), **numbers)
    return _math_suffix(rng, text)


def _math_word_change(rng: random.Random, f: Fillers) -> str:
    count = rng.randint(2, 9)
    price = rng.randint(1, 12) + rng.choice((0, 0.25, 0.5, 0.75))
    bill = next(note for note in (10, 20, 50, 100, 200) if note >= count * price)
    thing = rng.choice(("notebooks", "pens", "bus tickets", "muffins", "small plants"))
    name = rng.choice(f["names"])
    return _math_suffix(rng, (
        f"{name} buys {count} {thing} at ${_money(price)} each and pays with a ${bill} bill. "
        f"How much change does {name} get?"
    ))


def _math_word_clock(rng: random.Random, f: Fillers) -> str:
    hour, minute = rng.randint(6, 21), rng.randrange(0, 60, 5)
    duration = rng.randint(45, 230)
    start = f"{hour}:{minute:02d}"
    if rng.random() < 0.5:
        text = f"A movie starts at {start} and lasts {duration} minutes. What time does it end?"
    else:
        text = (
            f"{rng.choice(f['names'])}'s train leaves at {start} and the journey takes "
            f"{duration // 60} hours and {duration % 60} minutes. When does it arrive?"
        )
    return _math_suffix(rng, text)


def _math_word_increase(rng: random.Random, f: Fillers) -> str:
    old = rng.randint(5, 80)
    new = old + rng.randint(1, max(2, old // 2))
    thing = rng.choice(("concert ticket", "bus fare", "cup of coffee", "museum ticket"))
    return _math_suffix(
        rng, f"The price of a {thing} went up from ${old} to ${new}. What is the percentage "
        "increase?"
    )


def _math_word_heads_legs(rng: random.Random, f: Fillers) -> str:
    chickens, cows = rng.randint(3, 30), rng.randint(2, 20)
    return _math_suffix(rng, (
        f"A farmer has chickens and cows. Together they have {chickens + cows} heads and "
        f"{2 * chickens + 4 * cows} legs. How many chickens and how many cows are there?"
    ))


def _math_word_unit_price(rng: random.Random, f: Fillers) -> str:
    item = rng.choice(GROCERY_ITEMS)
    small, large = rng.randint(3, 6), rng.randint(8, 24)
    price_small = round(small * rng.uniform(0.3, 2.0), 2)
    price_large = round(large * rng.uniform(0.3, 2.0), 2)
    return _math_suffix(rng, (
        f"Pack A has {small} {item} for ${price_small:.2f}, and pack B has {large} {item} for "
        f"${price_large:.2f}. Which pack is the better deal per item?"
    ))


def _math_word(rng: random.Random, f: Fillers) -> str:
    specials = (
        _math_word_change, _math_word_clock, _math_word_increase, _math_word_heads_legs,
        _math_word_unit_price,
    )
    if rng.random() < 0.22:
        return rng.choice(specials)(rng, f)
    return _math_word_template(rng, f)


# summarize ------------------------------------------------------------------------------


def _summarize_passage(rng: random.Random, f: Fillers) -> str:
    passage: Passage = rng.choice(f["passages"])
    return rng.choice(SUMMARIZE_PHRASINGS).format(p=_flat(passage.text), title=passage.title)


def _summarize_email(rng: random.Random, f: Fillers) -> str:
    recipient, sender, other = rng.sample(list(f["names"]), 3)
    day, day2 = rng.sample(WEEKDAYS[:5], 2)
    project = rng.choice(f["email_projects"])
    body = rng.choice(f["email_bodies"]).format(
        project=project, day=day, day2=day2, time=rng.choice(EMAIL_TIMES),
        place=rng.choice(EMAIL_PLACES), name2=other,
    )
    greeting = rng.choice(EMAIL_GREETINGS).format(name=recipient)
    email = f"{greeting}\n\n{body}\n\n{rng.choice(EMAIL_SIGNOFFS)}\n{sender}"
    if rng.random() < 0.4:
        subject = rng.choice(("Quick update", "Change of plans", "Following up", "Next steps"))
        email = f"Subject: {subject}\n\n{email}"
    return rng.choice(EMAIL_PHRASINGS).format(e=email)


def _summarize_meeting(rng: random.Random, f: Fillers) -> str:
    names = rng.sample(list(f["names"]), 3)
    project = rng.choice(f["email_projects"])
    lines = [
        "- " + note.format(name=rng.choice(names), project=project)
        for note in rng.sample(MEETING_NOTES, rng.randint(4, 6))
    ]
    header = f"Notes from the {rng.choice(f['meeting_teams'])} meeting ({rng.choice(WEEKDAYS)}):"
    return rng.choice(MEETING_PHRASINGS).format(m="\n".join([header, *lines]))


def _summarize_review(rng: random.Random, f: Fillers) -> str:
    product = rng.choice(f["review_products"])
    aspects = rng.sample(REVIEW_ASPECTS, rng.randint(3, 5))
    n_praise = rng.randint(1, len(aspects) - 1)
    praise = [good for good, _ in aspects[:n_praise]]
    complaints = [bad for _, bad in aspects[n_praise:]]
    good_overall = len(praise) > len(complaints)
    verdicts = REVIEW_POSITIVE_VERDICTS if good_overall else REVIEW_NEGATIVE_VERDICTS
    review = _join(
        rng.choice(REVIEW_OPENINGS).format(product=product),
        *praise,
        rng.choice(("On the downside, ", "However, ", "That said, ")) + _lower_first(complaints[0]),
        *complaints[1:],
        rng.choice(verdicts),
    )
    return rng.choice(REVIEW_PHRASINGS).format(r=review)


def _summarize_pair(rng: random.Random, f: Fillers) -> str:
    first, second = rng.sample(list(f["passages"]), 2)
    return rng.choice(PAIR_SUMMARIZE_PHRASINGS).format(
        p1=_flat(first.text), p2=_flat(second.text), t1=first.title, t2=second.title
    )


# rewrite --------------------------------------------------------------------------------


def _rewrite_sentence(
    rng: random.Random, sentences: Sequence[str], phrasings: Sequence[str]
) -> str:
    base = rng.choice(phrasings).format(s=rng.choice(sentences))
    if "different ways" in base:
        return base
    return _join(base, _maybe(rng, 0.4, REWRITE_EXTRAS))


def _rewrite_formal(rng: random.Random, f: Fillers) -> str:
    return _rewrite_sentence(rng, f["casual_sentences"], REWRITE_FORMAL)


def _rewrite_polite(rng: random.Random, f: Fillers) -> str:
    return _rewrite_sentence(rng, f["blunt_sentences"], REWRITE_POLITE)


def _rewrite_simple(rng: random.Random, f: Fillers) -> str:
    return _rewrite_sentence(rng, f["complex_sentences"], REWRITE_SIMPLE)


def _rewrite_short(rng: random.Random, f: Fillers) -> str:
    return _rewrite_sentence(rng, f["wordy_sentences"], REWRITE_SHORT)


def _rewrite_grammar(rng: random.Random, f: Fillers) -> str:
    return _rewrite_sentence(rng, f["error_sentences"], REWRITE_GRAMMAR)


def _rewrite_active(rng: random.Random, f: Fillers) -> str:
    return _rewrite_sentence(rng, f["passive_sentences"], REWRITE_ACTIVE)


def _rewrite_style(rng: random.Random, f: Fillers) -> str:
    return _rewrite_sentence(rng, f["announcement_sentences"], REWRITE_STYLE)


def _rewrite_paragraph(rng: random.Random, f: Fillers) -> str:
    passage: Passage = rng.choice(f["passages"])
    base = rng.choice(REWRITE_PARAGRAPH).format(p=_flat(passage.text))
    return _join(base, _maybe(rng, 0.2, ("Keep the meaning the same.",
                                         "Only return the rewritten text.")))


# list -----------------------------------------------------------------------------------


def _list_of(rng: random.Random, topic: str) -> str:
    base = rng.choice(LIST_PHRASINGS).format(n=_count(rng), t=topic)
    return _casual(rng, _join(base, _maybe(rng, 0.4, LIST_CONSTRAINTS)))


def _list_topic(rng: random.Random, f: Fillers) -> str:
    return _list_of(rng, rng.choice(f["list_topics"]))


def _list_place(rng: random.Random, f: Fillers) -> str:
    if rng.random() < 0.5:
        topic = rng.choice(CITY_LIST_TOPICS).format(x=rng.choice(f["cities"]))
    else:
        topic = rng.choice(COUNTRY_LIST_TOPICS).format(x=rng.choice(f["countries"]))
    return _list_of(rng, topic)


def _list_people(rng: random.Random, f: Fillers) -> str:
    if rng.random() < 0.5:
        job = rng.choice(f["jobs"])
        topic = rng.choice(JOB_LIST_TOPICS).format(x=job, ax=_with_article(job))
    else:
        topic = rng.choice(HOBBY_LIST_TOPICS).format(x=rng.choice(f["hobbies"]))
    return _list_of(rng, topic)


# qa -------------------------------------------------------------------------------------


def _qa_fact(rng: random.Random, f: Fillers) -> str:
    return _casual(rng, rng.choice(FACT_WRAPPERS).format(q=rng.choice(f["fact_questions"])))


def _qa_country(rng: random.Random, f: Fillers) -> str:
    return _casual(rng, rng.choice(COUNTRY_QUESTIONS).format(c=rng.choice(f["countries"])))


def _qa_order(rng: random.Random, f: Fillers) -> str:
    people = rng.sample(list(f["names"]), rng.choice((3, 3, 4)))
    relation, top, bottom = rng.choice(ORDER_RELATIONS)
    facts = [f"{a} is {relation} {b}." for a, b in pairwise(people)]
    rng.shuffle(facts)
    return _join(*facts, rng.choice((top, bottom)))


def _qa_days(rng: random.Random, f: Fillers) -> str:
    day, n = rng.choice(WEEKDAYS), rng.randint(2, 100)
    return rng.choice((
        f"If today is {day}, what day of the week will it be in {n} days?",
        f"If the day before yesterday was {day}, what day is tomorrow?",
        f"If today is {day}, what day of the week was it {n} days ago?",
    ))


def _qa_sequence(rng: random.Random, f: Fillers) -> str:
    kind = rng.randrange(4)
    start = rng.randint(1, 20)
    if kind == 0:
        step = rng.randint(2, 12) * rng.choice((1, 1, -1))
        terms = [start + step * i for i in range(5)]
    elif kind == 1:
        ratio = rng.randint(2, 4)
        terms = [rng.randint(1, 5) * ratio**i for i in range(5)]
    elif kind == 2:
        offset = rng.randint(0, 5)
        terms = [(i + offset) ** 2 for i in range(1, 6)]
    else:
        terms = [start, start + rng.randint(1, 5)]
        while len(terms) < 6:
            terms.append(terms[-1] + terms[-2])
    shown = ", ".join(str(t) for t in terms)
    return rng.choice((
        f"What number comes next in this sequence: {shown}, ...?",
        f"Find the pattern and give the next two numbers: {shown}",
        f"What is the rule behind this sequence: {shown}?",
    ))


def _qa_letters(rng: random.Random, f: Fillers) -> str:
    word = rng.choice(f["count_words"])
    letter = rng.choice(sorted(set(word)))
    return rng.choice((
        f"How many times does the letter '{letter}' appear in the word '{word}'?",
        f"How many letters are in the word '{word}'?",
        f"Spell the word '{word}' backwards.",
        f"What is the third letter of the word '{word}'?",
    ))


def _qa_syllogism(rng: random.Random, f: Fillers) -> str:
    group, larger, quality = rng.choice(f["syllogisms"])
    return rng.choice((
        f"All {group} are {larger}. Some {larger} are {quality}. Does it follow that some "
        f"{group} are {quality}? Explain your reasoning.",
        f"If all {group} are {larger}, are all {larger} {group}? Explain.",
        f"If all {group} are {larger} and some {group} are {quality}, must some {larger} be "
        f"{quality}? Explain.",
    ))


def _qa_compare_numbers(rng: random.Random, f: Fillers) -> str:
    x = f"0.{rng.randint(1, 9)}"
    y = f"0.{rng.randint(10, 99)}"
    n1, n2 = rng.randint(1, 6), rng.randint(1, 6)
    d1, d2 = n1 + rng.randint(1, 5), n2 + rng.randint(1, 5)
    return rng.choice((
        f"Which is larger: {x} or {y}?",
        f"Which is greater, {n1}/{d1} or {n2}/{d2}? Explain.",
        f"Is {x} bigger or smaller than {y}?",
    ))


def _qa_reasoning(rng: random.Random, f: Fillers) -> str:
    kinds = (
        _qa_order, _qa_days, _qa_sequence, _qa_letters, _qa_syllogism, _qa_compare_numbers,
    )
    if rng.random() < 0.15:
        return rng.choice(f["riddles"])
    text = rng.choice(kinds)(rng, f)
    if "Explain" in text:
        return text
    return _join(text, _maybe(rng, 0.2, ("Explain your reasoning.", "Think it through.")))


def _qa_documents(rng: random.Random, f: Fillers) -> str:
    """Retrieval-style: several documents, the question is answered by one of them."""
    answer: Passage = rng.choice(f["passages"])
    others = [passage for passage in f["passages"] if passage != answer]
    documents = [answer, *rng.sample(others, rng.choice((1, 1, 2)))]
    while len(documents) > 2 and sum(_word_count(d.text) for d in documents) > MULTI_DOC_WORDS:
        documents.pop()
    rng.shuffle(documents)
    question = rng.choice(answer.questions)
    listed = "\n\n".join(
        f"[{i}] {doc.title}\n{_flat(doc.text)}" for i, doc in enumerate(documents, 1)
    )
    return rng.choice(MULTI_DOC_FORMATS).format(docs=listed, q=question)


def _qa_passage(rng: random.Random, f: Fillers) -> str:
    passage: Passage = rng.choice(f["passages"])
    roll = rng.random()
    if roll < 0.6:
        question = rng.choice(passage.questions)
    elif roll < 0.9:
        question = rng.choice(PASSAGE_GENERIC_QUESTIONS)
    else:
        question = rng.choice(PASSAGE_UNANSWERABLE)
    return rng.choice(PASSAGE_QA_FORMATS).format(
        p=_flat(passage.text), q=question, lq=_lower_first(question)
    )


# ---------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------

# Filler lists that are split between train and eval. Lists not named here (phrasings,
# constraints, units, weekdays...) are structure shared by both sides.
FILLERS: dict[str, Sequence[Any]] = {
    "names": NAMES,
    "cities": CITIES,
    "countries": COUNTRIES,
    "jobs": JOBS,
    "hobbies": HOBBIES,
    "items": ITEMS,
    "passages": PASSAGES,
    "science_concepts": SCIENCE_CONCEPTS,
    "tech_concepts": TECH_CONCEPTS,
    "society_concepts": SOCIETY_CONCEPTS,
    "history_events": HISTORY_EVENTS,
    "wonder_questions": WONDER_QUESTIONS,
    "compare_pairs": COMPARE_PAIRS,
    "howto_tasks": HOWTO_TASKS,
    "code_tasks": CODE_TASKS,
    "sql_tasks": SQL_TASKS,
    "shell_tasks": SHELL_TASKS,
    "buggy_snippets": BUGGY_SNIPPETS,
    "explain_snippets": EXPLAIN_SNIPPETS,
    "programming_questions": PROGRAMMING_QUESTIONS,
    "casual_sentences": CASUAL_SENTENCES,
    "blunt_sentences": BLUNT_SENTENCES,
    "complex_sentences": COMPLEX_SENTENCES,
    "wordy_sentences": WORDY_SENTENCES,
    "error_sentences": ERROR_SENTENCES,
    "passive_sentences": PASSIVE_SENTENCES,
    "announcement_sentences": ANNOUNCEMENT_SENTENCES,
    "list_topics": LIST_TOPICS,
    "small_talk": SMALL_TALK,
    "favorite_things": FAVORITE_THINGS,
    "advice_situations": ADVICE_SITUATIONS,
    "opinion_topics": OPINION_TOPICS,
    "debates": DEBATES,
    "recommendations": RECOMMENDATIONS,
    "life_news": LIFE_NEWS,
    "hypotheticals": HYPOTHETICALS,
    "creative_topics": CREATIVE_TOPICS,
    "fact_questions": FACT_QUESTIONS,
    "syllogisms": SYLLOGISMS,
    "riddles": RIDDLES,
    "count_words": COUNT_WORDS,
    "email_bodies": EMAIL_BODIES,
    "email_projects": EMAIL_PROJECTS,
    "meeting_teams": MEETING_TEAMS,
    "review_products": REVIEW_PRODUCTS,
}

# Per category: (weight, generator). Weights are relative; they roughly follow how many
# distinct prompts each generator can make, so small pools are not drawn to exhaustion.
CATEGORY_GENERATORS: dict[str, tuple[tuple[float, Generator], ...]] = {
    "chat": (
        (0.05, _chat_small_talk), (0.06, _chat_favorite), (0.22, _chat_advice),
        (0.12, _chat_opinion), (0.07, _chat_debate), (0.10, _chat_recommend),
        (0.07, _chat_news), (0.05, _chat_hypothetical), (0.08, _chat_job),
        (0.07, _chat_hobby), (0.05, _chat_travel), (0.06, _chat_creative),
    ),
    "explain": (
        (0.55, _explain_concept), (0.18, _explain_history), (0.17, _explain_wonder),
        (0.10, _explain_compare),
    ),
    "howto": ((1.0, _howto),),
    "code": (
        (0.40, _code_write), (0.11, _code_sql), (0.10, _code_shell), (0.15, _code_fix),
        (0.14, _code_explain), (0.10, _code_question),
    ),
    "math": (
        (0.20, _math_arithmetic), (0.15, _math_percent), (0.14, _math_units),
        (0.15, _math_algebra), (0.36, _math_word),
    ),
    "summarize": (
        (0.52, _summarize_passage), (0.18, _summarize_email), (0.13, _summarize_meeting),
        (0.10, _summarize_review), (0.07, _summarize_pair),
    ),
    "rewrite": (
        (0.13, _rewrite_formal), (0.10, _rewrite_polite), (0.12, _rewrite_simple),
        (0.11, _rewrite_short), (0.14, _rewrite_grammar), (0.05, _rewrite_active),
        (0.10, _rewrite_style), (0.25, _rewrite_paragraph),
    ),
    "list": ((0.72, _list_topic), (0.14, _list_place), (0.14, _list_people)),
    "qa": (
        (0.26, _qa_fact), (0.08, _qa_country), (0.26, _qa_reasoning), (0.30, _qa_passage),
        (0.10, _qa_documents),
    ),
}

# ---------------------------------------------------------------------------------------
# Building the set
# ---------------------------------------------------------------------------------------


def split_fillers(seed: int = 0) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Split every filler list into (train, eval) sides, deterministically for ``seed``.

    About ``EVAL_FRACTION`` of each list (at least ``MIN_EVAL_FILLERS`` items) goes to eval;
    both sides keep the original order of the items they hold.
    """
    train: dict[str, list[Any]] = {}
    held_out: dict[str, list[Any]] = {}
    for name, items in FILLERS.items():
        if len(set(items)) != len(items):
            raise ValueError(f"filler list {name!r} contains duplicates")
        order = list(range(len(items)))
        random.Random(f"headstart-prompts:split:{seed}:{name}").shuffle(order)
        n_eval = max(MIN_EVAL_FILLERS, round(len(items) * EVAL_FRACTION))
        eval_index = set(order[:n_eval])
        train[name] = [item for i, item in enumerate(items) if i not in eval_index]
        held_out[name] = [item for i, item in enumerate(items) if i in eval_index]
    return train, held_out


def _sample_unique(
    rng: random.Random,
    generators: Sequence[tuple[float, Generator]],
    fillers: Fillers,
    n: int,
    seen: set[str],
    label: str,
) -> list[str]:
    """Draw ``n`` prompts that are not in ``seen`` (which is updated in place)."""
    weights = [weight for weight, _ in generators]
    funcs = [func for _, func in generators]
    prompts: list[str] = []
    attempts = 0
    while len(prompts) < n:
        attempts += 1
        if attempts > n * MAX_ATTEMPTS_PER_PROMPT:
            raise RuntimeError(f"{label}: only {len(prompts)} of {n} unique prompts found")
        func = rng.choices(funcs, weights)[0]
        prompt = func(rng, fillers).strip()
        if prompt in seen:
            continue
        seen.add(prompt)
        prompts.append(prompt)
    return prompts


def _row(category: str, number: int, prompt: str) -> dict[str, str]:
    return {"id": f"{category}-{number:05d}", "category": category, "prompt": prompt}


def build_prompts(seed: int = 0) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Build (train, eval) prompt rows, deterministically for ``seed``.

    Each row is ``{"id": "<category>-<5 digits>", "category": ..., "prompt": ...}``. Train
    rows come shuffled across categories (ids stay stable); eval rows are grouped by
    category, with ids starting at ``EVAL_ID_OFFSET``.
    """
    train_fillers, eval_fillers = split_fillers(seed)
    seen: set[str] = set()
    train: list[dict[str, str]] = []
    for category in CATEGORIES:
        rng = random.Random(f"headstart-prompts:{seed}:{category}:train")
        prompts = _sample_unique(
            rng, CATEGORY_GENERATORS[category], train_fillers, TRAIN_COUNTS[category], seen,
            f"train/{category}",
        )
        train.extend(_row(category, i, prompt) for i, prompt in enumerate(prompts))
    held_out: list[dict[str, str]] = []
    for category in CATEGORIES:
        rng = random.Random(f"headstart-prompts:{seed}:{category}:eval")
        prompts = _sample_unique(
            rng, CATEGORY_GENERATORS[category], eval_fillers, EVAL_PER_CATEGORY, seen,
            f"eval/{category}",
        )
        held_out.extend(
            _row(category, EVAL_ID_OFFSET + i, prompt) for i, prompt in enumerate(prompts)
        )
    random.Random(f"headstart-prompts:{seed}:order").shuffle(train)
    validate(train, held_out)
    return train, held_out


def _word_count(text: str) -> int:
    return len(text.split())


def validate(train: Sequence[Mapping[str, str]], held_out: Sequence[Mapping[str, str]]) -> None:
    """Check ids, uniqueness, the train/eval separation, category shares and lengths."""
    rows = [*train, *held_out]
    ids = [row["id"] for row in rows]
    _require(len(set(ids)) == len(ids), "duplicate ids")
    prompts = [row["prompt"] for row in rows]
    _require(len(set(prompts)) == len(prompts), "duplicate prompts")
    train_prompts = {row["prompt"] for row in train}
    leaked = [row["id"] for row in held_out if row["prompt"] in train_prompts]
    _require(not leaked, f"eval prompts also in train: {leaked}")
    for row in rows:
        category, number = row["id"].rsplit("-", 1)
        _require(category == row["category"] in CATEGORIES, f"bad category: {row['id']}")
        _require(len(number) == 5 and number.isdigit(), f"bad id: {row['id']}")
        _require(_word_count(row["prompt"]) <= MAX_PROMPT_WORDS, f"too long: {row['id']}")
    train_counts = Counter(row["category"] for row in train)
    eval_counts = Counter(row["category"] for row in held_out)
    for category in CATEGORIES:
        share = train_counts[category] / len(train)
        _require(share >= MIN_CATEGORY_SHARE, f"{category} is only {share:.1%} of train")
        _require(eval_counts[category] == EVAL_PER_CATEGORY, f"eval {category} count")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def write_jsonl(path: Path, rows: Sequence[Mapping[str, str]]) -> None:
    """Write one JSON object per line, keys in the order id, category, prompt."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            record = {"id": row["id"], "category": row["category"], "prompt": row["prompt"]}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def _report(train: Sequence[Mapping[str, str]], held_out: Sequence[Mapping[str, str]]) -> str:
    train_counts = Counter(row["category"] for row in train)
    eval_counts = Counter(row["category"] for row in held_out)
    lines = [f"{'category':<10} {'train':>6} {'share':>6} {'eval':>5} {'mean words':>10}"]
    for category in CATEGORIES:
        words = [_word_count(row["prompt"]) for row in train if row["category"] == category]
        lines.append(
            f"{category:<10} {train_counts[category]:>6} "
            f"{train_counts[category] / len(train):>6.1%} {eval_counts[category]:>5} "
            f"{sum(words) / len(words):>10.1f}"
        )
    lines.append(f"{'total':<10} {len(train):>6} {'':>6} {len(held_out):>5}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=Path("data/prompts"),
                        help="folder for train.jsonl and eval.jsonl")
    parser.add_argument("--seed", type=int, default=0, help="seed for every random choice")
    args = parser.parse_args(argv)
    train, held_out = build_prompts(args.seed)
    write_jsonl(args.out_dir / "train.jsonl", train)
    write_jsonl(args.out_dir / "eval.jsonl", held_out)
    print(_report(train, held_out))
    print(f"wrote {args.out_dir / 'train.jsonl'} and {args.out_dir / 'eval.jsonl'}")


if __name__ == "__main__":
    main()
