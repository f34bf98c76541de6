#!/usr/bin/env python3
"""Build the synthetic cscore demo set: data/demo/demo.jsonl.

Every text below was written for this project; all people, places, firms,
events and numbers are invented. Candidate summaries are made from a
hand-written "clean" summary by controlled corruptions applied in code, and
each gets gold scores (1-5) from a fixed penalty table (see PENALTIES and
score()). Nothing is random: every "choice" is a SHA-256 hash of a fixed key,
so the output is byte-identical on every run and Python version.

Usage:
    python scripts/make_demo.py           # (re)write data/demo/demo.jsonl
    python scripts/make_demo.py --check   # exit 1 if the file is out of date

Python 3.10+, standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

OUT_PATH = Path(__file__).resolve().parent.parent / "data" / "demo" / "demo.jsonl"

ASPECTS = ("consistency", "fluency", "relevance")

# Points taken off a perfect 5 on each aspect, per corruption.
# Order of values: (consistency, fluency, relevance).
PENALTIES = {
    "disfluent-light": (0.0, 1.5, 0.0),  # 2 local edits
    "disfluent-heavy": (0.0, 2.5, 0.0),  # 4 local edits
    "dropped-small": (0.0, 0.0, 1.5),  # < 1/3 of the words removed
    "dropped-large": (0.0, 0.0, 2.5),  # >= 1/3 of the words removed
    "substituted": (2.0, 0.0, 0.5),  # one wrong entity or number
    "swapped": (2.5, 0.0, 0.5),  # two entities/numbers exchange roles
    "hallucinated": (2.0, 0.0, 1.0),  # one unsupported sentence appended
    "unrelated": (4.0, 4.0, 4.0),  # shuffled words of another document
}

# overall = weighted mean of the three aspects (consistency counts double).
OVERALL_WEIGHTS = {"consistency": 0.5, "fluency": 0.25, "relevance": 0.25}

# The `combined` candidate of document i uses COMBOS[i % len(COMBOS)].
COMBOS = (
    ("substituted", "disfluent"),
    ("swapped", "disfluent"),
    ("substituted", "hallucinated"),
    ("dropped", "hallucinated"),
    ("swapped", "hallucinated", "disfluent"),
)

# Words the disfluency step may delete ("dropped function words").
FUNCTION_WORDS = {
    "a", "an", "the", "of", "to", "in", "on", "at", "by", "for", "with",
    "from", "and", "its", "their", "has", "have", "was", "is", "will",
}

# Each document:
#   source      news-style paragraph (3-5 sentences)
#   reference   hand-written faithful summary (the `reference` field)
#   clean       hand-written faithful paraphrase of the reference; this is
#               the `clean` hypothesis and the base every corruption edits
#   substitute  (text in clean, wrong replacement)
#   swap        (a, b): two spans in clean that exchange places
#   drop        (span in clean, shorter replacement) that removes content
#   add         unsupported sentence appended for `hallucinated`
DOCS = [
    {
        "source": (
            "The city council of Vellmoor voted 7 to 2 on Tuesday to extend the Line 4 "
            "tram to the eastern district of Corran Heights. The extension will add six "
            "stations and is expected to cost 48 million crowns. Council member Oona "
            "Marsh, who proposed the plan, said construction would begin next spring. "
            "Opponents, led by council member Piet Halvard, argued the money should go "
            "to road repairs instead. The city expects the first trams to run on the new "
            "section in 2031."
        ),
        "reference": (
            "Vellmoor's council voted 7 to 2 to extend the Line 4 tram to Corran Heights, "
            "a 48 million crown plan proposed by Oona Marsh and opposed by Piet Halvard."
        ),
        "clean": (
            "Vellmoor's council approved, by 7 votes to 2, a 48 million crown extension of "
            "the Line 4 tram to Corran Heights. The plan was proposed by Oona Marsh and "
            "opposed by Piet Halvard."
        ),
        "substitute": ("a 48 million", "an 84 million"),
        "swap": ("Oona Marsh", "Piet Halvard"),
        "drop": (" The plan was proposed by Oona Marsh and opposed by Piet Halvard.", ""),
        "add": "The work will be paid for by a new parking tax.",
    },
    {
        "source": (
            "Researchers at the Halloway Marine Institute have described a new species of "
            "shrimp that glows green when disturbed. The animal, named Lucimysis arden, "
            "was found at a depth of 1,200 meters off the coast of the island of Serrat "
            "Vey. Lead author Dr. Ines Kovar said the team collected 14 specimens during "
            "a three-week expedition last autumn. The shrimp are about 2 centimeters long "
            "and appear to feed on drifting plankton. The findings were published this "
            "week in the Quarterly Review of Abyssal Fauna."
        ),
        "reference": (
            "Halloway Marine Institute researchers led by Dr. Ines Kovar described a new "
            "glowing shrimp, Lucimysis arden, after collecting 14 specimens 1,200 meters "
            "deep off Serrat Vey."
        ),
        "clean": (
            "A team led by Dr. Ines Kovar at the Halloway Marine Institute has named a new "
            "glowing shrimp, Lucimysis arden. They collected 14 specimens at 1,200 meters "
            "off Serrat Vey."
        ),
        "substitute": ("Dr. Ines Kovar", "Dr. Marta Linde"),
        "swap": ("14", "1,200"),
        "drop": (" They collected 14 specimens at 1,200 meters off Serrat Vey.", ""),
        "add": "The shrimp is already listed as endangered.",
    },
    {
        "source": (
            "The Tollwick Kestrels beat the Fenmarch Pikes 3-1 on Saturday to win the "
            "Northern Shield for the first time in 22 years. Striker Tomas Ellery scored "
            "twice in the second half, and defender Rafe Onyango added a late header. The "
            "Pikes had led at half-time through a penalty from captain Lio Sandell. About "
            "18,000 fans attended the final at Brackwater Stadium. Kestrels coach Maren "
            "Fisk said the win belonged to the club's youth academy."
        ),
        "reference": (
            "The Tollwick Kestrels beat the Fenmarch Pikes 3-1 to win the Northern Shield "
            "for the first time in 22 years, with Tomas Ellery scoring twice."
        ),
        "clean": (
            "Tomas Ellery scored twice as the Tollwick Kestrels beat the Fenmarch Pikes 3-1 "
            "in the Northern Shield final, the club's first title in 22 years."
        ),
        "substitute": ("3-1", "2-1"),
        "swap": ("Tollwick Kestrels", "Fenmarch Pikes"),
        "drop": (", the club's first title in 22 years", ""),
        "add": "Ellery was later sent off for a second yellow card.",
    },
    {
        "source": (
            "Greyline Foods, a maker of frozen dumplings based in Port Essaly, has agreed "
            "to buy the smaller noodle producer Amberleaf for 62 million dollars. The "
            "deal, announced on Monday, still needs approval from the regional trade "
            "board. Greyline chief executive Hana Voss said the purchase would let the "
            "company enter the dried noodle market. Amberleaf, founded by brothers Caius "
            "and Milo Dren in 2009, employs 340 people. Both companies said no job cuts "
            "were planned."
        ),
        "reference": (
            "Dumpling maker Greyline Foods agreed to buy noodle producer Amberleaf for 62 "
            "million dollars, subject to trade board approval, and no job cuts are planned."
        ),
        "clean": (
            "Greyline Foods has agreed to buy Amberleaf for 62 million dollars, pending "
            "approval from the regional trade board. The two firms say no jobs will be cut."
        ),
        "substitute": ("62 million", "340 million"),
        "swap": ("Greyline Foods", "Amberleaf"),
        "drop": (", pending approval from the regional trade board", ""),
        "add": "Greyline also plans to open a noodle shop in Port Essaly.",
    },
    {
        "source": (
            "Storm Idris brought winds of up to 140 kilometers per hour to the coastal "
            "province of Lendra overnight, cutting power to about 52,000 homes. The town "
            "of Salt Mere recorded 96 millimeters of rain in twelve hours, flooding its "
            "harbor road. No injuries were reported. Provincial emergency chief Abel "
            "Norrow said crews hoped to restore most power by Thursday evening. Ferries "
            "between Lendra and the island of Gask remain suspended."
        ),
        "reference": (
            "Storm Idris hit Lendra with winds of up to 140 kilometers per hour, leaving "
            "about 52,000 homes without power and flooding Salt Mere, though no injuries "
            "were reported."
        ),
        "clean": (
            "About 52,000 homes in Lendra lost power when Storm Idris brought 140 kilometer "
            "per hour winds. Salt Mere was flooded, but nobody was hurt."
        ),
        "substitute": ("Storm Idris", "Storm Bertil"),
        "swap": ("Lendra", "Salt Mere"),
        "drop": (" Salt Mere was flooded, but nobody was hurt.", ""),
        "add": "Two fishing boats were reported missing near Gask.",
    },
    {
        "source": (
            "The 30th Quillon Valley Lantern Festival drew a record 41,000 visitors over "
            "three nights, organizers said on Sunday. This year's theme was Rivers of "
            "Light, and more than 600 paper lanterns were floated down the Quill river. "
            "The top prize for lantern design went to local schoolteacher Bettany "
            "Oyelaran for a lantern shaped like a heron. Organizers plan to add a fourth "
            "night next year."
        ),
        "reference": (
            "A record 41,000 visitors saw more than 600 lanterns floated at the Quillon "
            "Valley Lantern Festival, where teacher Bettany Oyelaran won the design prize "
            "for a heron-shaped lantern."
        ),
        "clean": (
            "The Quillon Valley Lantern Festival drew a record 41,000 visitors, who watched "
            "more than 600 lanterns float down the river. Teacher Bettany Oyelaran won the design "
            "prize with a heron lantern."
        ),
        "substitute": ("heron", "swan"),
        "swap": ("41,000", "600"),
        "drop": (" Teacher Bettany Oyelaran won the design prize with a heron lantern.", ""),
        "add": "The festival will move to the city of Tarnbridge next year.",
    },
    {
        "source": (
            "A mobile eye clinic run by the charity ClearSight Trust examined 2,300 "
            "patients in the rural district of Moravel during a six-week tour. Doctors "
            "found that roughly one in five patients needed glasses, and 180 were "
            "referred for cataract surgery. The clinic, housed in a converted bus, is "
            "staffed by two optometrists and a nurse. Charity director Samir Holt said "
            "the service would return to Moravel in March."
        ),
        "reference": (
            "ClearSight Trust's mobile eye clinic examined 2,300 patients in Moravel over "
            "six weeks, referring 180 for cataract surgery, and will return in March."
        ),
        "clean": (
            "In six weeks, the ClearSight Trust eye clinic bus saw 2,300 patients in "
            "Moravel and sent 180 of them for cataract surgery. It is due back in March."
        ),
        "substitute": ("March", "October"),
        "swap": ("2,300", "180"),
        "drop": (" and sent 180 of them for cataract surgery", ""),
        "add": "The tour was paid for by the Moravel district government.",
    },
    {
        "source": (
            "Brindlecombe Secondary School will replace its old science block with a new "
            "building costing 9.5 million crowns, the district education office "
            "announced. The three-story building will include eight laboratories and a "
            "rooftop weather station. Head teacher Colm Adeyemi said students had been "
            "taking some science lessons in temporary cabins for two years. Work is set "
            "to start in June and finish before the autumn term of the following year."
        ),
        "reference": (
            "The district education office announced a 9.5 million crown science building "
            "for Brindlecombe Secondary School, with eight laboratories and a rooftop "
            "weather station; work begins in June."
        ),
        "clean": (
            "According to the district education office, Brindlecombe Secondary School "
            "will get a 9.5 million crown science building with eight labs and a rooftop "
            "weather station. Work starts in June."
        ),
        "substitute": ("eight", "twelve"),
        "swap": ("the district education office", "Brindlecombe Secondary School"),
        "drop": (" with eight labs and a rooftop weather station", ""),
        "add": "The old science block will be turned into a sports hall.",
    },
    {
        "source": (
            "Tessaly Systems unveiled its first solar-powered e-reader, the Pagewise Sol, "
            "at a trade fair in the city of Orvane on Wednesday. The device can run for up "
            "to nine weeks without being plugged in, the company claims. It will go on "
            "sale in November for 129 dollars. Product head Yuki Brannagh said early "
            "testers mainly asked for a larger screen, which the firm plans for a later "
            "model."
        ),
        "reference": (
            "Tessaly Systems unveiled the Pagewise Sol, a solar-powered e-reader said to "
            "last nine weeks between charges, which goes on sale in November for 129 "
            "dollars."
        ),
        "clean": (
            "The Pagewise Sol, Tessaly Systems' first solar e-reader, will sell for 129 "
            "dollars from November. The company says it can run for nine weeks without "
            "charging."
        ),
        "substitute": ("Tessaly Systems'", "Orvane Digital's"),
        "swap": ("129", "nine"),
        "drop": (" The company says it can run for nine weeks without charging.", ""),
        "add": "It also has a built-in camera.",
    },
    {
        "source": (
            "Archaeologists digging near the village of Hollin Ford have uncovered a stone "
            "bathhouse they believe is about 1,700 years old. The team, from Carrow "
            "University, found heated floors, three plunge pools and more than 200 coins. "
            "Site director Agata Pell said the building was larger than any similar "
            "structure found in the region. The dig will close for winter at the end of "
            "October, and the finds will go on display at the Hollin Ford museum next year."
        ),
        "reference": (
            "Carrow University archaeologists found a stone bathhouse about 1,700 years "
            "old near Hollin Ford, with heated floors, three plunge pools and over 200 "
            "coins."
        ),
        "clean": (
            "Near Hollin Ford, a Carrow University team has dug up a stone bathhouse about "
            "1,700 years old. Inside were heated floors, three plunge pools and more than "
            "200 coins."
        ),
        "substitute": ("1,700", "700"),
        "swap": ("three", "200"),
        "drop": (" Inside were heated floors, three plunge pools and more than 200 coins.", ""),
        "add": "The team believes the bathhouse was built for soldiers.",
    },
    {
        "source": (
            "The population of the rare Tarn otter in the Ellisfield wetlands has risen to "
            "86 animals, up from 31 a decade ago, according to a new survey. Rangers "
            "credit a ban on net fishing in the main lake and the replanting of reed beds "
            "along 12 kilometers of shoreline. Survey leader Noor Castellan warned that "
            "drought remained a threat. The wetlands authority plans to repeat the count "
            "in three years."
        ),
        "reference": (
            "Ellisfield's rare Tarn otter population has grown from 31 to 86 in a decade, "
            "helped by a net fishing ban and reed bed replanting, though drought remains "
            "a threat."
        ),
        "clean": (
            "A survey counted 86 Tarn otters in the Ellisfield wetlands, up from 31 ten "
            "years ago, thanks to a net fishing ban and new reed beds. Drought is still a "
            "risk."
        ),
        "substitute": ("net fishing ban", "hunting ban"),
        "swap": ("86", "31"),
        "drop": (", thanks to a net fishing ban and new reed beds", ""),
        "add": "The otters were brought back from a zoo in Gallowmere.",
    },
    {
        "source": (
            "A court in Darrowgate ruled on Friday that the shipping firm Keelmark must pay "
            "3.1 million marks to the fishing cooperative of Wenna Bay for polluting its "
            "waters. Judge Priya Lindqvist found that fuel leaks from a Keelmark tanker had "
            "damaged mussel beds in 2022. Keelmark said it would study the ruling before "
            "deciding whether to appeal. The cooperative's chair, Osric Bayliss, called the "
            "decision a relief for 70 fishing families."
        ),
        "reference": (
            "A Darrowgate court ordered shipping firm Keelmark to pay 3.1 million marks to "
            "the Wenna Bay fishing cooperative after fuel leaks from its tanker damaged "
            "mussel beds."
        ),
        "clean": (
            "A Darrowgate court has ordered Keelmark to pay the Wenna Bay fishing "
            "cooperative 3.1 million marks, after fuel from one of the shipping firm's "
            "tankers damaged mussel beds."
        ),
        "substitute": ("3.1 million", "1.3 million"),
        "swap": ("Keelmark", "the Wenna Bay fishing cooperative"),
        "drop": (", after fuel from one of the shipping firm's tankers damaged mussel beds", ""),
        "add": "The judge also banned Keelmark tankers from the bay for five years.",
    },
    {
        "source": (
            "The Auren Space Agency launched its first weather satellite, Cirrus-1, from "
            "the Tallow Point spaceport early on Thursday. The 450-kilogram satellite "
            "reached its planned orbit about 40 minutes after liftoff. It carries an "
            "infrared camera that will track storms over the Saren Sea. Mission manager "
            "Delphine Akers said the first images should arrive within two weeks. The "
            "agency plans to launch a second satellite in 2028."
        ),
        "reference": (
            "The Auren Space Agency launched its first weather satellite, the 450-kilogram "
            "Cirrus-1, from Tallow Point; it reached orbit and will track storms over the "
            "Saren Sea."
        ),
        "clean": (
            "Cirrus-1, the Auren Space Agency's first weather satellite, was launched from "
            "Tallow Point and reached orbit. The 450-kilogram craft will watch storms over "
            "the Saren Sea."
        ),
        "substitute": ("450-kilogram", "900-kilogram"),
        "swap": ("Tallow Point", "the Saren Sea"),
        "drop": (" The 450-kilogram craft will watch storms over the Saren Sea.", ""),
        "add": "It is the heaviest satellite ever launched from Tallow Point.",
    },
    {
        "source": (
            "The Lorne City Museum of Clocks has opened an exhibition of 120 mechanical "
            "clocks made by the clockmaker Ezra Vantongeren, who worked in the city in the "
            "1800s. The centerpiece is a 3-meter astronomical clock that shows the phases "
            "of the moon and was restored over four years. Curator Mina Solberg said "
            "around half the clocks had never been shown to the public. The exhibition "
            "runs until the end of August, and entry is free for children."
        ),
        "reference": (
            "The Lorne City Museum of Clocks is showing 120 clocks by 19th-century maker "
            "Ezra Vantongeren until the end of August, led by a 3-meter astronomical clock "
            "restored over four years."
        ),
        "clean": (
            "Until the end of August, the Lorne City Museum of Clocks is displaying 120 "
            "clocks by Ezra Vantongeren, a 19th-century local maker. Its highlight is a "
            "restored 3-meter astronomical clock."
        ),
        "substitute": ("Ezra Vantongeren", "Mina Solberg"),
        "swap": ("120", "3"),
        "drop": (" Its highlight is a restored 3-meter astronomical clock.", ""),
        "add": "Tickets cost 15 dollars for adults.",
    },
    {
        "source": (
            "Cargo traffic at the port of Orsk Harbor rose 14 percent last year to 2.6 "
            "million containers, the port authority said in its annual report. The growth "
            "came mainly from new routes to the southern islands, opened in March. Port "
            "director Hallam Reyes said a fourth crane berth would be finished by 2027 to "
            "ease queues. Ships currently wait an average of 19 hours before unloading."
        ),
        "reference": (
            "Orsk Harbor handled 2.6 million containers last year, a 14 percent rise "
            "driven by new routes to the southern islands, and plans a fourth crane berth "
            "by 2027."
        ),
        "clean": (
            "Thanks to new southern island routes, container traffic at Orsk Harbor grew "
            "14 percent to 2.6 million last year. A fourth crane berth is due by 2027."
        ),
        "substitute": ("2027", "2025"),
        "swap": ("14 percent", "2.6 million"),
        "drop": (" A fourth crane berth is due by 2027.", ""),
        "add": "The port authority also cut its fees by half.",
    },
    {
        "source": (
            "Engineers have joined the two halves of the new Ashby Narrows bridge, which "
            "will link the towns of Brellin and Stow Marrick across the estuary. The "
            "1.4-kilometer bridge replaces a ferry service that has run since 1962. "
            "Project lead Ravi Dunmore said the road surface and lighting would take "
            "another seven months. Once open, the bridge is expected to cut the journey "
            "between the towns from 50 minutes to 12."
        ),
        "reference": (
            "The two halves of the 1.4-kilometer Ashby Narrows bridge between Brellin and "
            "Stow Marrick have been joined; it will replace a ferry and cut the trip from "
            "50 to 12 minutes."
        ),
        "clean": (
            "Engineers have connected the two halves of the Ashby Narrows bridge, which "
            "will replace the ferry between Brellin and Stow Marrick. The 1.4-kilometer "
            "crossing will cut the journey from 50 minutes to 12."
        ),
        "substitute": ("1.4-kilometer", "4-kilometer"),
        "swap": ("50", "12"),
        "drop": (" The 1.4-kilometer crossing will cut the journey from 50 minutes to 12.", ""),
        "add": "Drivers will pay a toll for the first ten years.",
    },
    {
        "source": (
            "Sixteen-year-old Ana Melchior won the Westerholt Open chess tournament on "
            "Sunday, finishing ahead of 140 players. She beat the top seed, grandmaster "
            "Viktor Halloran, in the final round after a five-hour game. Melchior scored "
            "7.5 points from nine games and earns a place in the national championship. "
            "Halloran finished third, behind Ida Roussel, while about 300 spectators "
            "followed the last round in the town hall."
        ),
        "reference": (
            "Sixteen-year-old Ana Melchior won the Westerholt Open ahead of 140 players, "
            "beating top seed Viktor Halloran in the final round and qualifying for the "
            "national championship."
        ),
        "clean": (
            "Ana Melchior, 16, took the Westerholt Open by defeating top seed Viktor "
            "Halloran in the last round, finishing ahead of 140 players and earning a "
            "national championship place."
        ),
        "substitute": ("140", "40"),
        "swap": ("Ana Melchior", "Viktor Halloran"),
        "drop": (
            ", finishing ahead of 140 players and earning a national championship place",
            "",
        ),
        "add": "It was her third Westerholt title.",
    },
    {
        "source": (
            "Apple growers in the Merrow Hills expect their smallest harvest in 15 years "
            "after a late frost in April damaged blossom, the regional growers' "
            "association said. The association estimates the crop at 38,000 tonnes, down "
            "from 61,000 last year. Prices at the Merrow wholesale market have already "
            "risen by about a third. Association head Gideon Falk said some smaller "
            "orchards may need emergency loans."
        ),
        "reference": (
            "After a late April frost, Merrow Hills apple growers expect their smallest "
            "harvest in 15 years, about 38,000 tonnes against 61,000 last year, and "
            "wholesale prices are up by a third."
        ),
        "clean": (
            "Merrow Hills apple growers forecast 38,000 tonnes, down from 61,000 and their "
            "smallest harvest in 15 years, after an April frost hit the blossom. Wholesale "
            "prices are up about a third."
        ),
        "substitute": ("an April frost", "a May frost"),
        "swap": ("38,000", "61,000"),
        "drop": (" Wholesale prices are up about a third.", ""),
        "add": "The government has promised growers a special subsidy.",
    },
    {
        "source": (
            "The public library in Fennick Cross reopened on Saturday after an 18-month "
            "renovation that cost 4.2 million dollars. The building now has a children's "
            "wing, a recording studio and solar panels that supply most of its power. "
            "Librarian Tove Andrade said 1,100 people visited on the first day, more than "
            "triple a normal Saturday. Opening hours have also been extended to 9 p.m. on "
            "weekdays."
        ),
        "reference": (
            "Fennick Cross library reopened after an 18-month, 4.2 million dollar "
            "renovation that added a children's wing, a recording studio and solar "
            "panels, drawing 1,100 visitors on its first day."
        ),
        "clean": (
            "After 18 months and 4.2 million dollars of work, the Fennick Cross library "
            "has reopened with a children's wing, a recording studio and solar panels. It "
            "had 1,100 visitors on day one."
        ),
        "substitute": ("recording studio", "swimming pool"),
        "swap": ("18", "1,100"),
        "drop": (" It had 1,100 visitors on day one.", ""),
        "add": "The mayor cut the ribbon at the opening.",
    },
    {
        "source": (
            "Kenji Orlova won the Saltmarsh City Marathon on Sunday in 2 hours 11 minutes, "
            "beating last year's winner Dario Fenwick by 40 seconds. In the women's race, "
            "Leah Mbeki set a course record of 2 hours 26 minutes. About 9,500 runners "
            "took part in cool, dry conditions. Organizers said the event raised 310,000 "
            "dollars for the city's hospital."
        ),
        "reference": (
            "Kenji Orlova won the Saltmarsh City Marathon in 2 hours 11 minutes, 40 "
            "seconds ahead of defending champion Dario Fenwick, while Leah Mbeki set a "
            "women's course record."
        ),
        "clean": (
            "Kenji Orlova beat defending champion Dario Fenwick by 40 seconds to win the "
            "Saltmarsh City Marathon in 2 hours 11 minutes. Leah Mbeki won the women's "
            "race in a course record."
        ),
        "substitute": ("40 seconds", "four minutes"),
        "swap": ("Kenji Orlova", "Dario Fenwick"),
        "drop": (" Leah Mbeki won the women's race in a course record.", ""),
        "add": "Orlova was running his first marathon.",
    },
]


# ---------------------------------------------------------------- helpers


def pick(key: str, n: int) -> int:
    """Deterministic stand-in for random.randrange(n), driven by a text key."""
    return int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % n


def shuffled(items: list, key: str) -> list:
    """Deterministic Fisher-Yates shuffle."""
    items = list(items)
    for i in range(len(items) - 1, 0, -1):
        j = pick(f"{key}:{i}", i + 1)
        items[i], items[j] = items[j], items[i]
    return items


def span_pattern(span: str) -> str:
    """Regex for `span` that does not match inside a longer word or number."""
    head = r"(?<![\w,.])" if span[0].isalnum() else ""
    tail = r"(?![\w]|[,.]\d)" if span[-1].isalnum() else ""
    return head + re.escape(span) + tail


def replace_once(text: str, old: str, new: str) -> str:
    """Replace `old` with `new`; `old` must occur exactly once as a whole span."""
    pattern = span_pattern(old)
    found = len(re.findall(pattern, text))
    if found != 1:
        raise ValueError(f"{old!r} occurs {found} times in {text!r}")
    return re.sub(pattern, lambda _: new, text)


def swap_spans(text: str, a: str, b: str) -> str:
    """Exchange the single occurrences of `a` and `b`."""
    for span in (a, b):
        found = len(re.findall(span_pattern(span), text))
        if found != 1:
            raise ValueError(f"{span!r} occurs {found} times in {text!r}")
    pattern = f"{span_pattern(a)}|{span_pattern(b)}"
    return re.sub(pattern, lambda m: b if m.group(0) == a else a, text)


def is_plain(token: str) -> bool:
    """A word with no digits or punctuation around it (safe to repeat or move).

    Numbers are left alone so that disfluency never changes a fact.
    """
    return re.fullmatch(r"[A-Za-z'-]+", token) is not None


def disfluency_level(doc_index: int) -> str:
    """Even-numbered documents get light disfluency, odd ones heavy."""
    return "light" if doc_index % 2 == 0 else "heavy"


def make_disfluent(text: str, level: str, key: str) -> tuple[str, str]:
    """Apply local edits that hurt fluency but keep every fact in place.

    light = repeat a word + swap two neighbouring words;
    heavy = that, plus drop a function word and swap another pair.
    Edits are placed on the original words, never on or next to each other,
    so no edit can undo or hide another.
    """
    steps = ["repeat", "swap"] if level == "light" else ["repeat", "swap", "drop", "swap"]
    words = text.split(" ")
    taken: set[int] = set()  # word positions used by an edit, plus neighbours
    edits = []  # (position, step)
    for n, step in enumerate(steps):
        if step == "repeat":
            spots = [i for i, w in enumerate(words) if is_plain(w)]
        elif step == "swap":
            spots = [
                i
                for i in range(len(words) - 1)
                if is_plain(words[i])
                and is_plain(words[i + 1])
                and words[i].lower() != words[i + 1].lower()
            ]
        else:  # drop
            spots = [i for i, w in enumerate(words) if w.lower() in FUNCTION_WORDS]
        width = 2 if step == "swap" else 1
        spots = [i for i in spots if not taken & set(range(i, i + width))]
        if not spots:
            raise RuntimeError(f"no room for a {step} edit in {key}")
        i = spots[pick(f"{key}:{n}", len(spots))]
        taken |= set(range(i - 1, i + width + 1))
        edits.append((i, step))

    notes = []
    for i, step in sorted(edits):  # notes in reading order
        if step == "repeat":
            notes.append(f"repeated '{words[i]}'")
        elif step == "swap":
            notes.append(f"swapped '{words[i]} {words[i + 1]}'")
        else:
            notes.append(f"dropped '{words[i]}'")
    for i, step in sorted(edits, reverse=True):  # right to left keeps positions valid
        if step == "repeat":
            words.insert(i + 1, words[i].lower())
        elif step == "swap":
            words[i], words[i + 1] = words[i + 1], words[i]
        else:
            del words[i]
    return " ".join(words), f"{level} disfluency: " + "; ".join(notes)


def word_salad(text: str, key: str) -> str:
    """Lower-case words of `text` in shuffled order, no punctuation."""
    words = re.findall(r"[\w'-]+", text.lower())
    mixed = shuffled(words, key)
    if mixed == words:
        raise RuntimeError(f"shuffle left {key} unchanged")
    return " ".join(mixed) + "."


def n_words(text: str) -> int:
    return len(text.split())


# ------------------------------------------------------------ corruptions


def apply_corruption(kind: str, text: str, doc: dict, doc_index: int, key: str):
    """Return (new text, note, penalty key) for one corruption of `text`."""
    if kind == "disfluent":
        level = disfluency_level(doc_index)
        new, note = make_disfluent(text, level, key)
        return new, note, f"disfluent-{level}"
    if kind == "dropped":
        span, replacement = doc["drop"]
        new = replace_once(text, span, replacement)
        removed, total = n_words(text) - n_words(new), n_words(text)
        size = "large" if 3 * removed >= total else "small"
        note = f"dropped {removed} of {total} words: {span.strip()!r}"
        return new, note, f"dropped-{size}"
    if kind == "substituted":
        old, wrong = doc["substitute"]
        return replace_once(text, old, wrong), f"substituted {old!r} -> {wrong!r}", kind
    if kind == "swapped":
        a, b = doc["swap"]
        return swap_spans(text, a, b), f"swapped {a!r} <-> {b!r}", kind
    if kind == "hallucinated":
        return f"{text} {doc['add']}", f"appended unsupported {doc['add']!r}", kind
    raise ValueError(kind)


def score(penalty_keys: list[str]) -> dict[str, float]:
    """Gold scores: 5 minus summed penalties per aspect (floor 1), then overall."""
    scores = {}
    for n, aspect in enumerate(ASPECTS):
        lost = sum(PENALTIES[k][n] for k in penalty_keys)
        scores[aspect] = max(1.0, 5.0 - lost)
    scores["overall"] = sum(OVERALL_WEIGHTS[a] * scores[a] for a in ASPECTS)
    return scores


def candidates(doc: dict, doc_index: int) -> list[tuple[str, str, str, list[str]]]:
    """All (system, hypothesis, note, penalty keys) for one document."""
    doc_id = doc["id"]
    base = doc["clean"]
    rows = [("clean", base, "hand-written faithful paraphrase of the reference", [])]

    for kind in ("disfluent", "dropped", "substituted", "swapped", "hallucinated"):
        text, note, pkey = apply_corruption(kind, base, doc, doc_index, f"{doc_id}:{kind}")
        rows.append((kind, text, note, [pkey]))

    # Content edits first, disfluency last, so the hand-given spans still match.
    text, notes, pkeys = base, [], []
    for kind in COMBOS[doc_index % len(COMBOS)]:
        text, note, pkey = apply_corruption(kind, text, doc, doc_index, f"{doc_id}:combined")
        notes.append(note)
        pkeys.append(pkey)
    rows.append(("combined", text, "combined: " + " + ".join(notes), pkeys))

    other = DOCS[(doc_index + len(DOCS) // 2) % len(DOCS)]
    salad = word_salad(other["clean"], f"{doc_id}:unrelated")
    rows.append(("unrelated", salad, f"shuffled words of the {other['id']} summary", ["unrelated"]))
    return rows


def build_rows() -> list[dict]:
    for i, doc in enumerate(DOCS):
        doc["id"] = f"demo-{i + 1:02d}"
    rows = []
    for i, doc in enumerate(DOCS):
        check_doc(doc)
        for system, text, note, pkeys in candidates(doc, i):
            if not text.strip() or text == doc["clean"] and system != "clean":
                raise RuntimeError(f"{doc['id']}-{system}: empty or unchanged hypothesis")
            rows.append(
                {
                    "id": f"{doc['id']}-{system}",
                    "doc_id": doc["id"],
                    "system": system,
                    "source": doc["source"],
                    "reference": doc["reference"],
                    "hypothesis": text,
                    "scores": score(pkeys),
                    "corruption": note,
                }
            )
    ids = [r["id"] for r in rows]
    if len(ids) != len(set(ids)):
        raise RuntimeError("duplicate ids")
    return rows


def check_doc(doc: dict) -> None:
    """Keep the texts short enough for quick CPU scoring."""
    if not 55 <= n_words(doc["source"]) <= 115:
        raise ValueError(f"{doc['id']}: source has {n_words(doc['source'])} words")
    for field in ("reference", "clean"):
        if n_words(doc[field]) > 40:
            raise ValueError(f"{doc['id']}: {field} has {n_words(doc[field])} words")


def render(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if demo.jsonl differs from a fresh build"
    )
    args = parser.parse_args(argv)

    rows = build_rows()
    text = render(rows)
    if args.check:
        current = OUT_PATH.read_text(encoding="utf-8") if OUT_PATH.exists() else None
        if current != text:
            print(f"{OUT_PATH} is out of date; run: python scripts/make_demo.py", file=sys.stderr)
            return 1
        print(f"{OUT_PATH} is up to date ({len(rows)} rows)")
        return 0

    OUT_PATH.parent.mkdir(parents=True, exist_ok=True)
    with open(OUT_PATH, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(f"wrote {len(rows)} rows ({len(DOCS)} documents) to {OUT_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
